package grad

import "fmt"

// UnsupportedError reports a valid model the compiler cannot differentiate:
// an operator without a gradient rule, an attribute value a rule does not
// handle, a node with a subgraph (If, Loop, Scan), a trainable pattern that
// selects nothing. Test for it with errors.As; other errors are malformed
// models or runtime failures.
type UnsupportedError struct {
	Node string // the node's name, "" when the error is not about one node
	Op   string // the node's operator type
	What string // what is unsupported
}

func (e *UnsupportedError) Error() string {
	if e.Op == "" {
		return "unsupported: " + e.What
	}
	return fmt.Sprintf("unsupported: node %q (%s): %s", e.Node, e.Op, e.What)
}

// unsupportedf makes an UnsupportedError; backNode fills in the node.
func unsupportedf(format string, args ...any) error {
	return &UnsupportedError{What: fmt.Sprintf(format, args...)}
}
