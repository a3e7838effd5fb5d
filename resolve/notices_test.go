package resolve

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// The notices go on w, the caller's names for the settings in them; the
// warning about unusable embedded settings goes on warn.
func TestWriteNotices(t *testing.T) {
	var w, warn bytes.Buffer
	s := Settings{MetadataErr: errors.New("bad contract")}
	s.WriteNotices(&w, &warn, "p: ", "m.onnx", false, func(key string) string { return "--" + strings.ReplaceAll(key, "_", "-") })
	if got := warn.String(); !strings.HasPrefix(got, "p: warning: bad contract; ignoring the model's embedded settings") {
		t.Errorf("warning %q", got)
	}
	if got := w.String(); !strings.HasPrefix(got, "p: m.onnx is not a known model") || !strings.Contains(got, "set --value-scale/--value-offset") || strings.Contains(got, "warning") {
		t.Errorf("notices %q", got)
	}
}
