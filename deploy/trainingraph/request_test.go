package trainingraph

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/onnx"
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

// Request.Compile refuses a size it cannot read and a model that cannot
// take the spec as usage errors (status 2), named the caller's way; a
// batch the graph cannot have is no usage error.
func TestRequestCompileUsageErrors(t *testing.T) {
	b := &onnx.Builder{}
	w := b.Initializer(onnx.NewFloat32Tensor("w", []int64{2, 3, 1, 1}, make([]float32, 6)))
	b.Emit("Conv", "conv", []string{"input", w}, []string{"logits"})
	m := onnx.NewModel(b.Graph("net",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", onnx.Float32, 1, 3, "h", "w")},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("logits", onnx.Float32, 1, 2, "h", "w")}), 17)
	path := filepath.Join(t.TempDir(), "m.onnx")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	none := func(string) bool { return false }
	flag := func(key string) string { return "--" + key }
	status := func(err error) int {
		var exit interface{ ExitCode() int }
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		return 1
	}
	r := Request{Spec: Spec{Model: path, Trainable: []string{"all"}, Batch: 1, Input: "input"}, Size: "8x8", Loss: "ce"}
	for name, edit := range map[string]func(*Request){
		"size":      func(r *Request) { r.Size = "eight" },
		"input":     func(r *Request) { r.Input = "nope" },
		"trainable": func(r *Request) { r.Trainable = []string{"re:("} },
	} {
		bad := r
		edit(&bad)
		if _, err := bad.Compile(none); status(err) != 2 || !strings.Contains(setting.Rename(err, flag).Error(), name) {
			t.Errorf("%s: %v (exit %d)", name, err, status(err))
		}
	}
	r.Batch = 0
	if _, err := r.Compile(none); err == nil || status(err) != 1 {
		t.Errorf("batch 0: %v (exit %d)", err, status(err))
	}
}
