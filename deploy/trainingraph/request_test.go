package trainingraph

import (
	"errors"
	"testing"

	"github.com/segtune/segtune/internal/setting"
)

// A Request's size, loss and ignore label become the Spec's; what the
// model refuses is named by its caller's names for the settings.
func TestRequestParseAndSpecErrorNamed(t *testing.T) {
	s, err := Request{Size: "8x12", Loss: "bce", Ignore: -1}.Parse()
	if err != nil || s.Height != 8 || s.Width != 12 || !s.Loss.NoIgnore || s.Loss.IgnoreIndex != nil {
		t.Fatalf("Parse: %+v, %v", s, err)
	}
	flag := func(key string) string { return "--" + key }
	if _, err := (Request{Size: "8", Loss: "x"}).Parse(); err == nil || setting.Rename(err, flag).Error() != `--loss "x": want ce or bce` {
		t.Errorf("loss x: %v", err)
	}
	for field, want := range map[string]string{
		"Trainable": "--trainable: bad",
		"Contract":  "bad (name the image input with --input for other models)",
		"Model":     "bad",
	} {
		if got := (&SpecError{Field: field, Err: errors.New("bad")}).Named(flag); got != want {
			t.Errorf("%s: %q, want %q", field, got, want)
		}
	}
}
