package folder_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// redOverGreen opens a model of one 1×1 convolution whose class 1 logit
// is red minus green and class 0's is zero: a pixel is class 1 exactly
// where it is redder than green.
func redOverGreen(t *testing.T) *inference.Segmenter {
	t.Helper()
	return convSegmenter(t, []float32{0, 0, 0, 1, -1, 0})
}

// convSegmenter opens a model of one 1×1 convolution of weights w (2×3):
// class c's logit is w[3c:3c+3] · (r, g, b).
func convSegmenter(t *testing.T, weights []float32) *inference.Segmenter {
	t.Helper()
	runtimetest.Require(t)
	b := &onnx.Builder{}
	w := b.Initializer(onnx.NewFloat32Tensor("w", []int64{2, 3, 1, 1}, weights))
	b.Emit("Conv", "conv", []string{"input", w}, []string{"logits"})
	f32 := onnx.Float32
	m := onnx.NewModel(b.Graph("conv",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", f32, "n", 3, "h", "w")},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("logits", f32, "n", 2, "h", "w")}), 17)
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ct, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := inference.Open(data, ct, imageio.Preprocess{Resize: imageio.ResizeNone}, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// scene is a w×h image whose pixel (x, y) is red where (x+k)%3 == 0 and
// green elsewhere, so that each image has its own mask.
func scene(w, h, k int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.RGBA{0, 200, 0, 255}
			if (x+k)%3 == 0 {
				c = color.RGBA{220, 10, 0, 255}
			}
			img.SetRGBA(x, y, c)
		}
	}
	return img
}

// wantLabels is the mask of scene(w, h, k), worked out from its colours.
func wantLabels(w, h, k int) []uint8 {
	l := make([]uint8, w*h)
	for i := range l {
		if (i%w+k)%3 == 0 {
			l[i] = 1
		}
	}
	return l
}

func encode(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := imageio.EncodePNG(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writeImages writes n scenes (img0.png …) and one file that is not an
// image (bad.png) into dir.
func writeImages(t *testing.T, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < n; k++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("img%d.png", k)), encode(t, scene(7+k, 5, k)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.png"), []byte("not a png"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func local(t *testing.T, p string) *storage.Folder {
	t.Helper()
	f, err := storage.OpenFolder(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// checkMasks checks the masks of n scenes in out against their colours.
func checkMasks(t *testing.T, out string, n int) {
	t.Helper()
	for k := 0; k < n; k++ {
		img, err := imageio.ReadImage(filepath.Join(out, fmt.Sprintf("img%d.png", k)))
		if err != nil {
			t.Fatal(err)
		}
		p, ok := img.(*image.Paletted)
		if !ok {
			t.Fatalf("img%d.png is a %T, want a palette PNG", k, img)
		}
		if w := wantLabels(7+k, 5, k); !slices.Equal(p.Pix, w) {
			t.Errorf("img%d.png labels %v, want %v", k, p.Pix, w)
		}
	}
}

// A folder is segmented into a mask and an overlay per image; the image
// that cannot be decoded is reported by name. A second run that keeps
// what exists skips every output that checks out and makes again, with a
// notice, the one that was cut short.
func TestSegmentFolderAndSkipExisting(t *testing.T) {
	seg := redOverGreen(t)
	dir := t.TempDir()
	inDir, outDir := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	writeImages(t, inDir, 4)
	opts := folder.Options{Overlay: &imageio.OverlayOptions{Alpha: 0.5}, Batch: 2}
	var progress []int
	opts.Progress = func(done int) { progress = append(progress, done) }
	rep, err := folder.Segment(context.Background(), seg, local(t, inDir), local(t, outDir), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 5 || rep.Succeeded != 4 || len(rep.Failures) != 1 || filepath.Base(rep.Failures[0].Path) != "bad.png" {
		t.Fatalf("report %+v, want 4 of 5 images and bad.png failed", rep)
	}
	if !slices.Equal(progress, []int{1, 2, 3, 4, 5}) {
		t.Errorf("progress %v, want 1 … 5", progress)
	}
	checkMasks(t, outDir, 4)
	for k := 0; k < 4; k++ {
		ov, err := imageio.ReadImage(filepath.Join(outDir, "overlays", fmt.Sprintf("img%d.png", k)))
		if err != nil {
			t.Fatal(err)
		}
		if b := ov.Bounds(); b.Dx() != 7+k || b.Dy() != 5 {
			t.Errorf("overlay img%d.png is %v", k, b)
		}
	}

	cut := filepath.Join(outDir, "img2.png")
	whole, err := os.ReadFile(cut)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, whole[:len(whole)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	var notes []string
	opts.SkipExisting = true
	opts.Progress = nil
	opts.Notef = func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }
	rep, err = folder.Segment(context.Background(), seg, local(t, inDir), local(t, outDir), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Skipped != 3 || rep.Succeeded != 1 || len(rep.Failures) != 1 {
		t.Errorf("rerun report %+v, want 3 skipped, 1 made again, 1 failed", rep)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "img2.png again") {
		t.Errorf("notices %q, want one about img2.png", notes)
	}
	if again, err := os.ReadFile(cut); err != nil || !bytes.Equal(again, whole) {
		t.Errorf("img2.png made again differs from the first run's (%v)", err)
	}
}

// A shard rerun with another model makes every mask again: the masks of
// the first model are complete, of the images' sizes and of the classes
// the second model has, and were kept as done (#45). One notice says so.
// A mask of an older segtune, which did not record its model, is made
// again too; a rerun with the same model keeps its masks, byte for byte.
func TestSkipExistingRemakesOtherModelsMasks(t *testing.T) {
	red := redOverGreen(t)
	green := convSegmenter(t, []float32{0, 0, 0, -1, 1, 0}) // class 1 where greener than red
	if a, b := red.MaskIdentity(), redOverGreen(t).MaskIdentity(); a == "" || a != b {
		t.Fatalf("one model opened twice has identities %q and %q", a, b)
	}
	if red.MaskIdentity() == green.MaskIdentity() {
		t.Fatal("two models have one identity")
	}
	dir := t.TempDir()
	inDir, outDir := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	writeImages(t, inDir, 6)
	os.Remove(filepath.Join(inDir, "bad.png"))
	var notes []string
	opts := folder.Options{Shard: shard.Spec{Index: 0, Count: 2}, SkipExisting: true,
		Notef: func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }}
	run := func(seg *inference.Segmenter) pipeline.Report {
		t.Helper()
		notes = nil
		rep, err := folder.Segment(context.Background(), seg, local(t, inDir), local(t, outDir), opts)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	first := run(red)
	owned := first.Succeeded
	if owned == 0 || owned == 6 || first.Skipped != 0 {
		t.Fatalf("first shard run %+v: want some of the 6 images, none skipped", first)
	}
	if rep := run(green); rep.Succeeded != owned || rep.Skipped != 0 {
		t.Errorf("rerun with another model %+v: want all %d masks made again, none kept", rep, owned)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "another model") {
		t.Errorf("notices %q, want one about another model's masks", notes)
	}
	masks, _ := filepath.Glob(filepath.Join(outDir, "*.png"))
	if len(masks) != owned {
		t.Fatalf("%d masks, want %d", len(masks), owned)
	}
	before := map[string][]byte{}
	for _, m := range masks {
		b, _ := os.ReadFile(m)
		before[m] = b
		img, err := imageio.ReadImage(m)
		if err != nil {
			t.Fatal(err)
		}
		var k int
		fmt.Sscanf(filepath.Base(m), "img%d.png", &k)
		want := wantLabels(7+k, 5, k)
		for i := range want {
			want[i] = 1 - want[i]
		}
		if p, ok := img.(*image.Paletted); !ok || !slices.Equal(p.Pix, want) {
			t.Errorf("%s is not the second model's mask", m)
		}
	}
	if rep := run(green); rep.Skipped != owned || rep.Succeeded != 0 || len(notes) != 0 {
		t.Errorf("rerun with the same model %+v, notices %q: want every mask kept, silently", rep, notes)
	}
	// An older segtune's mask: the same pixels, marked without a model.
	old := masks[0]
	img, err := imageio.ReadImage(old)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := imageio.EncodeOutputPNG(&b, img, ""); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(old, b.Bytes(), 0o644)
	if rep := run(green); rep.Succeeded != 1 || rep.Skipped != owned-1 {
		t.Errorf("rerun over an older segtune's mask %+v: want it made again, the rest kept", rep)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "older segtune") {
		t.Errorf("notices %q, want one about an older segtune's mask", notes)
	}
	for _, m := range masks {
		if after, _ := os.ReadFile(m); !bytes.Equal(after, before[m]) {
			t.Errorf("%s differs from the same model's first mask", m)
		}
	}
}

// Every shard of a split writes only its own images, and the shards
// together write what one run writes.
func TestShardsPartitionTheFolder(t *testing.T) {
	seg := redOverGreen(t)
	dir := t.TempDir()
	inDir, outDir := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	const n = 12
	writeImages(t, inDir, n)
	os.Remove(filepath.Join(inDir, "bad.png"))
	seen := 0
	for i := 0; i < 3; i++ {
		spec := shard.Spec{Index: i, Count: 3}
		rep, err := folder.Segment(context.Background(), seg, local(t, inDir), local(t, outDir), folder.Options{Shard: spec})
		if err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(outDir)
		if len(entries) != seen+rep.Succeeded {
			t.Errorf("shard %v: %d outputs after it wrote %d (%d before)", spec, len(entries), rep.Succeeded, seen)
		}
		seen = len(entries)
	}
	if seen != n {
		t.Fatalf("the shards wrote %d masks, want %d", seen, n)
	}
	checkMasks(t, outDir, n)
}

// A bucket folder (in memory) in and out gives the masks a local folder
// gives, byte for byte.
func TestBucketFolderMatchesLocal(t *testing.T) {
	seg := redOverGreen(t)
	dir := t.TempDir()
	inDir, outDir := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	writeImages(t, inDir, 3)
	bucket := memblob.OpenBucket(nil)
	in := storage.NewBucketFolder(bucket, storage.Location{Scheme: "s3", Bucket: "b", Key: "in"}, false)
	out := storage.NewBucketFolder(bucket, storage.Location{Scheme: "s3", Bucket: "b", Key: "out"}, false)
	names, _ := os.ReadDir(inDir)
	for _, e := range names {
		data, _ := os.ReadFile(filepath.Join(inDir, e.Name()))
		if err := in.Write(context.Background(), e.Name(), func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, run := range []struct{ in, out *storage.Folder }{{local(t, inDir), local(t, outDir)}, {in, out}} {
		rep, err := folder.Segment(ctx, seg, run.in, run.out, folder.Options{})
		if err != nil || rep.Succeeded != 3 || len(rep.Failures) != 1 || rep.Failures[0].Path != run.in.Path("bad.png") {
			t.Fatalf("%s: %+v, %v; want 3 masks and %s failed", run.in, rep, err, run.in.Path("bad.png"))
		}
	}
	for k := 0; k < 3; k++ {
		name := fmt.Sprintf("img%d.png", k)
		want, _ := os.ReadFile(filepath.Join(outDir, name))
		got, err := out.ReadAll(ctx, name, 1<<20)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s from the bucket differs from the local mask (%v)", name, err)
		}
	}
}

// What would overwrite the input, or mix two images' masks, is refused
// before any work, with errors a caller can tell apart.
func TestRefusals(t *testing.T) {
	seg := redOverGreen(t)
	ctx := context.Background()
	dir := t.TempDir()
	inDir := filepath.Join(dir, "in")
	writeImages(t, inDir, 1)

	_, err := folder.Segment(ctx, seg, local(t, inDir), local(t, filepath.Join(inDir, "masks")), folder.Options{})
	var oe *folder.OverlapError
	if !errors.As(err, &oe) {
		t.Errorf("output inside the input: %v, want an *OverlapError", err)
	}

	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	_, err = folder.Segment(ctx, seg, local(t, empty), local(t, filepath.Join(dir, "o1")), folder.Options{})
	var ne *folder.NoImagesError
	if !errors.As(err, &ne) || ne.Folder != empty {
		t.Errorf("empty input: %v, want a *NoImagesError naming %s", err, empty)
	}

	// An output file that is a link to an input image.
	linked := filepath.Join(dir, "linked")
	os.Mkdir(linked, 0o755)
	if err := os.Symlink(filepath.Join(inDir, "img0.png"), filepath.Join(linked, "img0.png")); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(inDir, "img0.png"))
	_, err = folder.Segment(ctx, seg, local(t, inDir), local(t, linked), folder.Options{})
	if err == nil || !strings.Contains(err.Error(), "would overwrite the input image") {
		t.Errorf("output linked to an input: %v, want a refusal", err)
	}
	if after, _ := os.ReadFile(filepath.Join(inDir, "img0.png")); !bytes.Equal(after, before) {
		t.Error("the input image was overwritten")
	}

	// Two images with one stem, local and in a bucket.
	os.WriteFile(filepath.Join(inDir, "img0.jpg"), []byte("x"), 0o644)
	_, err = folder.Segment(ctx, seg, local(t, inDir), local(t, filepath.Join(dir, "o2")), folder.Options{})
	if err == nil || !strings.Contains(err.Error(), "would both be written as img0.png") {
		t.Errorf("a.jpg and a.png: %v, want a refusal", err)
	}
	bucket := memblob.OpenBucket(nil)
	in := storage.NewBucketFolder(bucket, storage.Location{Scheme: "s3", Bucket: "b", Key: "in"}, false)
	for _, name := range []string{"a.b.png", "a.jpg", "a.png"} {
		in.Write(ctx, name, func(w io.Writer) error { _, err := w.Write([]byte("x")); return err })
	}
	_, err = folder.Segment(ctx, seg, in, local(t, filepath.Join(dir, "o3")), folder.Options{})
	var fe *folder.FolderError
	if !errors.As(err, &fe) || fe.Output || !strings.Contains(err.Error(), "s3://b/in/a.jpg and s3://b/in/a.png") {
		t.Errorf("a.jpg and a.png in a bucket: %v, want an input *FolderError naming both", err)
	}
	for _, o := range []string{"o1", "o2", "o3"} {
		if _, err := os.Stat(filepath.Join(dir, o)); err == nil {
			t.Errorf("refused run created %s", o)
		}
	}
}

// The window of open stems finds exactly the names a full map of stems
// finds, over sorted listings with nested stems.
func TestStemWindowMatchesAMap(t *testing.T) {
	for _, names := range [][]string{
		{"a.b.png", "a.jpg", "a.png"},
		{"a.b.jpg", "a.b.png"},
		{"a.jpg", "ab.jpg", "ab.png"},
		{"a.jpg", "a.b.c.png", "a.b.png", "a.png"},
		{"a.jpg", "a0.jpg", "b.jpg"},
	} {
		slices.Sort(names)
		var w folder.StemWindow
		seen := map[string]string{}
		for _, n := range names {
			prev, dup := w.Add(n)
			wantPrev, wantDup := seen[folder.Stem(n)]
			if dup != wantDup || prev != wantPrev {
				t.Errorf("%v: Add(%s) = %q, %v; want %q, %v", names, n, prev, dup, wantPrev, wantDup)
				break
			}
			seen[folder.Stem(n)] = n
		}
	}
}
