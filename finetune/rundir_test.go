package finetune

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckRunDir(t *testing.T) {
	root := t.TempDir()
	models, data, elsewhere := filepath.Join(root, "models"), filepath.Join(root, "data"), filepath.Join(root, "links")
	for _, d := range []string{models, filepath.Join(data, "images"), elsewhere} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	model := filepath.Join(models, "m.onnx")
	if err := os.WriteFile(model, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(elsewhere, "m.onnx")
	if err := os.Symlink(model, link); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Train: DataSpec{Data: data}, Val: DataSpec{Images: filepath.Join(root, "val")}}
	cfg.Network.BaseModel = link
	for dir, want := range map[string]*RunDirOverlapError{
		filepath.Join(root, "run"):           nil,
		root:                                 nil, // above the data, not inside it
		elsewhere:                            {What: "the folder of the base model " + link},
		models:                               {What: "the folder of the base model " + link}, // the link resolved
		filepath.Join(data, "images", "run"): {What: "the data folder " + data, Inside: true},
		data:                                 {What: "the data folder " + data, Inside: true},
		filepath.Join(root, "val"):           {What: "the validation images folder " + filepath.Join(root, "val")},
	} {
		err := CheckRunDir(dir, cfg)
		var oe *RunDirOverlapError
		switch {
		case want == nil && err != nil:
			t.Errorf("%s: %v", dir, err)
		case want != nil && !errors.As(err, &oe):
			t.Errorf("%s: error %v, want a RunDirOverlapError", dir, err)
		case want != nil && (oe.Dir != dir || oe.What != want.What || oe.Inside != want.Inside):
			t.Errorf("%s: %+v, want What %q Inside %v", dir, oe, want.What, want.Inside)
		}
	}
}
