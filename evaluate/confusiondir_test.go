package evaluate

import (
	"bytes"
	"errors"
	"image"
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/metrics"
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

// TestConfusionFilesAreNeverAUsers: a folder holding a confusion.csv or
// confusion.png that segtune did not write is refused naming the file;
// segtune's own files (and an unmarked heat map beside segtune's CSV, as
// earlier versions wrote) may be replaced, and WriteConfusionFiles writes
// files this check takes for its own.
func TestConfusionFilesAreNeverAUsers(t *testing.T) {
	m := metrics.NewConfusion(2, 255)
	if err := m.Add([]uint8{0, 1, 1}, []uint8{0, 1, 0}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		setup       func(dir string)
		foreignFile string // "" accepted
	}{
		{"segtune's own", func(dir string) { mustWriteConfusion(t, dir, m) }, ""},
		{"a user's csv", func(dir string) { mustWriteFile(t, filepath.Join(dir, "confusion.csv"), "a,b\n1,2\n") }, "confusion.csv"},
		{"a user's png", func(dir string) { mustWriteFile(t, filepath.Join(dir, "confusion.png"), "\x89PNG\r\n\x1a\nnot ours") }, "confusion.png"},
		{"unmarked png beside segtune's csv", func(dir string) {
			mustWriteConfusion(t, dir, m)
			var b bytes.Buffer
			if err := imageio.EncodePNG(&b, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
				t.Fatal(err)
			}
			mustWriteFile(t, filepath.Join(dir, "confusion.png"), b.String())
		}, ""},
		{"a user's png beside no csv", func(dir string) {
			var b bytes.Buffer
			if err := imageio.EncodePNG(&b, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
				t.Fatal(err)
			}
			mustWriteFile(t, filepath.Join(dir, "confusion.png"), b.String())
		}, "confusion.png"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(dir)
			err := CheckConfusionDir(dir)
			var fe *ForeignFileError
			switch {
			case c.foreignFile == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.foreignFile != "" && (!errors.As(err, &fe) || filepath.Base(fe.Path) != c.foreignFile):
				t.Fatalf("error %v, want a ForeignFileError naming %s", err, c.foreignFile)
			}
		})
	}
}

func mustWriteConfusion(t *testing.T, dir string, m *metrics.Confusion) {
	t.Helper()
	if err := metrics.WriteConfusionFiles(dir, m, []string{"bg", "fg"}); err != nil {
		t.Fatal(err)
	}
}

func mustWriteFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
