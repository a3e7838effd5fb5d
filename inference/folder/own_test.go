package folder_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/internal/storage"
)

// annotation writes a w×h palette PNG of labels 0 and 1 as a labelling
// tool would (no mark) at path and returns its bytes.
func annotation(t *testing.T, path string, w, h int) []byte {
	t.Helper()
	labels := make([]uint8, w*h)
	for i := range labels {
		labels[i] = uint8(i % 2)
	}
	if err := imageio.WriteMaskPNG(path, labels, w, h, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A local output folder that holds a mask segment did not write (the
// user's annotation of the same name) is refused before any work, the
// file kept; Overwrite replaces it; a run over its own earlier outputs
// replaces them without asking.
func TestForeignOutputsAreNotReplaced(t *testing.T) {
	seg := redOverGreen(t)
	ctx := context.Background()
	for _, overlay := range []bool{false, true} {
		dir := t.TempDir()
		inDir, outDir := filepath.Join(dir, "in"), filepath.Join(dir, "out")
		writeImages(t, inDir, 3)
		foreign := filepath.Join(outDir, "img1.png")
		if overlay {
			foreign = filepath.Join(outDir, "overlays", "img1.png")
		}
		if err := os.MkdirAll(filepath.Dir(foreign), 0o755); err != nil {
			t.Fatal(err)
		}
		gt := annotation(t, foreign, 2, 2)
		opts := folder.Options{Overlay: &imageio.OverlayOptions{Alpha: 0.5}}
		_, err := folder.Segment(ctx, seg, local(t, inDir), local(t, outDir), opts)
		var fe *folder.ForeignOutputError
		if !errors.As(err, &fe) || fe.Path != foreign {
			t.Fatalf("overlay %v: %v; want a ForeignOutputError naming %s", overlay, err, foreign)
		}
		if b, _ := os.ReadFile(foreign); !bytes.Equal(b, gt) {
			t.Fatalf("overlay %v: the annotation was changed", overlay)
		}
		if _, err := os.Stat(filepath.Join(outDir, "img0.png")); err == nil {
			t.Errorf("overlay %v: a mask was written before the refusal", overlay)
		}
		opts.Overwrite = true
		if rep, err := folder.Segment(ctx, seg, local(t, inDir), local(t, outDir), opts); err != nil || rep.Succeeded != 3 {
			t.Fatalf("overlay %v, Overwrite: %+v, %v", overlay, rep, err)
		}
		if b, _ := os.ReadFile(foreign); bytes.Equal(b, gt) {
			t.Errorf("overlay %v: Overwrite kept the annotation", overlay)
		}
		opts.Overwrite = false
		if rep, err := folder.Segment(ctx, seg, local(t, inDir), local(t, outDir), opts); err != nil || rep.Succeeded != 3 {
			t.Errorf("overlay %v: a run over its own outputs: %+v, %v", overlay, rep, err)
		}
	}
}

// In a bucket the output is checked when it is written: the image whose
// name holds a foreign object fails naming it, the object kept; the
// others are written. Keeping existing outputs does not keep it either,
// though it is a mask of the image's size and the model's classes.
func TestForeignBucketOutputFailsItsImage(t *testing.T) {
	seg := redOverGreen(t)
	ctx := context.Background()
	dir := t.TempDir()
	inDir := filepath.Join(dir, "in")
	writeImages(t, inDir, 3)
	gt := annotation(t, filepath.Join(dir, "gt.png"), 9, 5) // img2 is 9×5
	for _, skip := range []bool{false, true} {
		out := storage.NewBucketFolder(memblob.OpenBucket(nil), storage.Location{Scheme: "s3", Bucket: "b", Key: "out"}, false)
		if err := out.Write(ctx, "img2.png", func(w io.Writer) error { _, err := w.Write(gt); return err }); err != nil {
			t.Fatal(err)
		}
		rep, err := folder.Segment(ctx, seg, local(t, inDir), out, folder.Options{SkipExisting: skip})
		if err != nil {
			t.Fatal(err)
		}
		var fe *folder.ForeignOutputError
		failed := map[string]bool{}
		for _, f := range rep.Failures {
			failed[filepath.Base(f.Path)] = true
			if filepath.Base(f.Path) == "img2.png" && (!errors.As(f.Err, &fe) || fe.Path != out.Path("img2.png")) {
				t.Errorf("skip %v: img2.png failed with %v, want a ForeignOutputError naming %s", skip, f.Err, out.Path("img2.png"))
			}
		}
		if rep.Succeeded != 2 || rep.Skipped != 0 || !failed["img2.png"] || !failed["bad.png"] {
			t.Errorf("skip %v: report %+v; want img0 and img1 written, img2 and bad failed", skip, rep)
		}
		if b, err := out.ReadAll(ctx, "img2.png", 1<<20); err != nil || !bytes.Equal(b, gt) {
			t.Errorf("skip %v: the annotation in the bucket was changed (%v)", skip, err)
		}
	}
}
