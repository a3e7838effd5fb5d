package contract

import "fmt"

// LayoutError reports a tensor whose axes may be misread in the layout
// taken for it; naming the layout (Overrides.InputLayout or OutputLayout)
// is the fix. Advice says so in the library's words; a program with its
// own name for that setting (a flag) puts it in their place.
type LayoutError struct {
	Input bool   // the input's layout, else the output's
	Try   Layout // the layout to try; "" when it cannot tell
	Msg   string // what was seen
}

func (e *LayoutError) Error() string { return e.Msg + "; " + e.Advice() }

// Advice is the last part of the message: which layout to set.
func (e *LayoutError) Advice() string {
	switch {
	case e.Input:
		return fmt.Sprintf("the model may want the %s input layout", lower(e.Try))
	case e.Try != "":
		return fmt.Sprintf("if the output is %s, set its layout to %s", e.Try, lower(e.Try))
	}
	return "set the output layout (nchw or nhwc)"
}

// UnsupportedError reports a model segtune cannot run as a segmenter at
// all, whatever its settings: not one float32 image input, or no output
// of class scores or integer labels.
type UnsupportedError struct{ Msg string }

func (e *UnsupportedError) Error() string { return e.Msg }

func unsupported(format string, args ...any) error {
	return &UnsupportedError{Msg: fmt.Sprintf(format, args...)}
}
