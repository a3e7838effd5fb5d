package evaluate

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckConfusionDir(t *testing.T) {
	root := t.TempDir()
	images, masks := filepath.Join(root, "images"), filepath.Join(root, "masks")
	for _, d := range []string{images, masks} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(root, "notes.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(masks, link); err != nil {
		t.Fatal(err)
	}
	inputs := []string{images, masks, "s3://bucket/masks"}
	for _, c := range []struct {
		dir   string
		input int // -2: accepted
		err   error
	}{
		{filepath.Join(root, "confusion"), -2, nil}, // not there yet
		{root, -2, nil},
		{file, -1, ErrNotFolder},
		{images + "/", 0, nil},
		{link, 1, nil}, // the masks folder through a link
	} {
		err := CheckConfusionDir(c.dir, inputs...)
		var ce *ConfusionDirError
		switch {
		case c.input == -2 && err != nil:
			t.Errorf("%s: %v; want it accepted", c.dir, err)
		case c.input == -2:
		case !errors.As(err, &ce) || ce.Input != c.input || !errors.Is(err, c.err) && c.err != nil:
			t.Errorf("%s: %v; want a *ConfusionDirError of input %d (%v)", c.dir, err, c.input, c.err)
		}
	}
}
