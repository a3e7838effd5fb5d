package contract

import (
	"fmt"

	"github.com/segtune/segtune/internal/setting"
)

// LayoutError reports a tensor whose axes may be misread in the layout
// taken for it; naming the layout (Overrides.InputLayout, the setting
// nhwc, or OutputLayout, output_layout) is the fix.
type LayoutError struct {
	Input bool   // the input's layout, else the output's
	Try   Layout // the layout to try; "" when it cannot tell
	Msg   string // what was seen
}

func (e *LayoutError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key); its last part
// says which layout to set.
func (e *LayoutError) Named(name func(key string) string) string {
	switch {
	case e.Input && e.Try == NHWC:
		return setting.Sprintf(name, "%s; the model may want {nhwc}", e.Msg)
	case e.Input:
		return setting.Sprintf(name, "%s; the model may want no {nhwc}", e.Msg)
	case e.Try != "":
		return setting.Sprintf(name, "%s; if the output is %s, pass {output_layout} %s", e.Msg, e.Try, lower(e.Try))
	}
	return setting.Sprintf(name, "%s; pass {output_layout} nchw|nhwc", e.Msg)
}

// UnsupportedError reports a model segtune cannot run as a segmenter at
// all, whatever its settings: not one float32 image input, or no output
// of class scores or integer labels.
type UnsupportedError struct{ Msg string }

func (e *UnsupportedError) Error() string { return e.Msg }

func unsupported(format string, args ...any) error {
	return &UnsupportedError{Msg: fmt.Sprintf(format, args...)}
}
