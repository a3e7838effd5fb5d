package grad

import (
	"errors"
	"fmt"

	"github.com/segtune/segtune/onnx"
)

// UnsupportedError reports a valid model the compiler cannot differentiate:
// an operator without a gradient rule (or of another domain), an attribute
// or input value a rule or an opset upgrade does not handle (Resize mode
// "cubic", a Dropout in training mode, Resize scales computed from a
// trainable tensor), a node with a subgraph (If, Loop, Scan), a Constant
// or graph input of a kind the compiler does not read, an opset older than
// 7, a trainable pattern that selects nothing. Test for it with errors.As;
// other errors are malformed models or runtime failures.
type UnsupportedError struct {
	Node string // the node's name, "" when the error is not about one node
	Op   string // the node's operator type, "" when not about one node
	What string // what is unsupported
}

func (e *UnsupportedError) Error() string {
	if e.Op == "" {
		return "unsupported: " + e.What
	}
	return fmt.Sprintf("unsupported: node %q (%s): %s", e.Node, e.Op, e.What)
}

// unsupportedf makes an UnsupportedError; atNode fills in the node.
func unsupportedf(format string, args ...any) error {
	return &UnsupportedError{What: fmt.Sprintf(format, args...)}
}

// atNode attributes an error raised while handling node n (by its rule or
// its upgrade): an UnsupportedError not yet about a node gets n's name and
// operator, any other error is wrapped with them.
func atNode(n *onnx.NodeProto, err error) error {
	var ue *UnsupportedError
	if errors.As(err, &ue) && ue.Op == "" {
		ue.Node, ue.Op = n.GetName(), n.GetOpType()
		return ue
	}
	return fmt.Errorf("node %q (%s): %w", n.GetName(), n.GetOpType(), err)
}
