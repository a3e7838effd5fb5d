package datalayout

import (
	"errors"
	"image"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
)

// touch creates empty files (layouts are found by names alone).
func touch(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func names(set *Set) []string {
	var out []string
	for _, s := range set.Samples {
		out = append(out, s.Name)
	}
	return out
}

func unmatched(set *Set) []string {
	var out []string
	for _, u := range set.Unmatched {
		out = append(out, filepath.Base(u.Path))
	}
	return out
}

func TestCityscapes(t *testing.T) {
	root := t.TempDir()
	for _, split := range []string{"train", "val"} {
		for _, n := range []string{"aachen/aachen_000000_000019", "bochum/bochum_000000_000313"} {
			touch(t, root, "leftImg8bit/"+split+"/"+n+"_leftImg8bit.png",
				"gtFine/"+split+"/"+n+"_gtFine_labelIds.png", "gtFine/"+split+"/"+n+"_gtFine_color.png",
				"gtFine/"+split+"/"+n+"_gtFine_instanceIds.png", "gtFine/"+split+"/"+n+"_gtFine_polygons.json")
		}
	}
	touch(t, root, "leftImg8bit/val/bochum/bochum_000000_000999_leftImg8bit.png",
		"gtFine/val/aachen/aachen_000000_000777_gtFine_labelIds.png")
	set, err := Open(root, Options{Split: "validation"})
	if err != nil {
		t.Fatal(err)
	}
	if set.Format != "cityscapes" || set.Split != "val" || set.LabelPreset != "cityscapes" || !slices.Equal(set.Splits, []string{"train", "val"}) {
		t.Fatalf("format %q split %q preset %q splits %v", set.Format, set.Split, set.LabelPreset, set.Splits)
	}
	if want := []string{"aachen/aachen_000000_000019", "bochum/bochum_000000_000313"}; !slices.Equal(names(set), want) {
		t.Errorf("samples %v, want %v", names(set), want)
	}
	s := set.Samples[0]
	if s.Image != filepath.Join(root, "leftImg8bit/val/aachen/aachen_000000_000019_leftImg8bit.png") ||
		s.Mask != filepath.Join(root, "gtFine/val/aachen/aachen_000000_000019_gtFine_labelIds.png") {
		t.Errorf("sample %+v", s)
	}
	if want := []string{"aachen_000000_000777_gtFine_labelIds.png", "bochum_000000_000999_leftImg8bit.png"}; !slices.Equal(unmatched(set), want) {
		t.Errorf("unmatched %v, want %v", unmatched(set), want)
	}
	var ue *UnmatchedError
	if err := set.Err(); !errors.As(err, &ue) || !strings.Contains(err.Error(), "bochum_000000_000999_leftImg8bit.png: image without a mask") {
		t.Errorf("Err() = %v", err)
	}
	if !strings.Contains(set.Summary(), "cityscapes layout, split val: 2 image/mask pairs, 2 unmatched files") {
		t.Errorf("summary %q", set.Summary())
	}
	var se *SplitError
	if _, err := Open(root, Options{}); !errors.As(err, &se) || !strings.Contains(err.Error(), "train, val") {
		t.Errorf("no split: %v", err)
	}
	if _, err := Open(root, Options{Split: "test"}); !errors.As(err, &se) || !strings.Contains(err.Error(), `no split "test"`) {
		t.Errorf("missing split: %v", err)
	}
}

func TestVOC(t *testing.T) {
	root := t.TempDir()
	touch(t, root, "JPEGImages/2007_000032.jpg", "JPEGImages/2007_000033.jpg", "JPEGImages/2007_000039.jpg",
		"JPEGImages/2008_000001.jpg", // detection only: not listed, not a problem
		"SegmentationClass/2007_000032.png", "SegmentationClass/2007_000033.png", "SegmentationClass/2007_000042.png",
		"SegmentationObject/2007_000032.png", "Annotations/2007_000032.xml")
	lists := map[string]string{
		"train.txt": "2007_000032\n2007_000039\n\n",
		"val.txt":   "2007_000033\r\n2007_000042\n2007_000099\n",
	}
	for name, text := range lists {
		p := filepath.Join(root, "ImageSets", "Segmentation", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	train, err := Open(root, Options{Split: "train"})
	if err != nil {
		t.Fatal(err)
	}
	if train.Format != "voc" || train.LabelPreset != "voc" || !slices.Equal(names(train), []string{"2007_000032"}) ||
		!slices.Equal(unmatched(train), []string{"2007_000039.jpg"}) {
		t.Errorf("train: %s %v, unmatched %v", train.Format, names(train), unmatched(train))
	}
	val, err := Open(root, Options{Split: "val"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names(val), []string{"2007_000033"}) || !slices.Equal(unmatched(val), []string{"val.txt", "2007_000042.png"}) {
		t.Errorf("val: %v, unmatched %v", names(val), unmatched(val))
	}
	if !strings.Contains(val.Err().Error(), "lists 2007_000099") {
		t.Errorf("val: %v", val.Err())
	}
	// Without split lists, VOC says how to pair by name instead.
	if err := os.RemoveAll(filepath.Join(root, "ImageSets")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(root, Options{Split: "train"}); err == nil || !strings.Contains(err.Error(), setting.Advice(FixNoSplitLists).String()) {
		t.Errorf("no lists: %v", err)
	}
	all, err := Open(root, Options{Format: "folders"})
	if err != nil || len(all.Samples) != 2 || len(all.Unmatched) != 3 {
		t.Errorf("as folders: %v, %v", all, err)
	}
}

func TestADE20K(t *testing.T) {
	root := t.TempDir()
	touch(t, root, "images/training/ADE_train_00000001.jpg", "annotations/training/ADE_train_00000001.png",
		"images/validation/ADE_val_00000001.jpg", "annotations/validation/ADE_val_00000001.png")
	set, err := Open(root, Options{Split: "train"})
	if err != nil {
		t.Fatal(err)
	}
	if set.Format != "ade20k" || set.Split != "training" || set.LabelPreset != "ade20k" || !slices.Equal(names(set), []string{"ADE_train_00000001"}) {
		t.Errorf("%s %s %s %v", set.Format, set.Split, set.LabelPreset, names(set))
	}
}

func TestFolders(t *testing.T) {
	cases := []struct {
		name, split string
		files       []string
		want        []string
		unmatched   []string
	}{
		{"flat", "", []string{"images/a.jpg", "images/b.png", "masks/a.png", "masks/b.png"}, []string{"a", "b"}, nil},
		{"per split", "val", []string{"images/train/a.jpg", "masks/train/a.png", "images/val/b.jpg", "masks/val/b.png"}, []string{"b"}, nil},
		{"split first", "train", []string{"train/img/a.jpg", "train/labels/a.png", "val/img/b.jpg", "val/labels/b.png"}, []string{"a"}, nil},
		{"mmseg", "val", []string{"img_dir/train/a.jpg", "ann_dir/train/a.png", "img_dir/val/c.jpg", "ann_dir/val/c.png"}, []string{"c"}, nil},
		{"nested", "train", []string{"images/train/seq1/a.jpg", "images/train/seq2/a.jpg", "masks/train/seq1/a.png", "masks/train/seq2/a.png", "masks/train/seq3/z.png"},
			[]string{"seq1/a", "seq2/a"}, []string{"z.png"}},
		{"nested without splits", "", []string{"images/seq1/a.jpg", "masks/seq1/a.png"}, []string{"seq1/a"}, nil},
		{"suffixes", "", []string{"images/a.jpg", "images/b.jpg", "images/c_leftImg8bit.png", "images/d.jpg",
			"masks/a_mask.png", "masks/b_labelIds.png", "masks/c_gtFine_labelIds.png", "masks/d.png", "masks/d_mask.png"},
			[]string{"a", "b", "c", "d"}, []string{"d_mask.png"}},
		{"side by side", "", []string{"a.tif", "a_mask.tif", "b.jpg", "b_mask.png", "c.jpg"}, []string{"a", "b"}, []string{"c.jpg"}},
		{"hidden files", "", []string{"images/a.jpg", "images/.a.jpg.tmp123.png", "masks/a.png", "masks/.git/x.png"}, []string{"a"}, nil},
	}
	for _, c := range cases {
		root := t.TempDir()
		touch(t, root, c.files...)
		set, err := Open(root, Options{Split: c.split})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if set.Format != "folders" || !slices.Equal(names(set), c.want) || !slices.Equal(unmatched(set), c.unmatched) {
			t.Errorf("%s: %s %v, unmatched %v; want %v, %v", c.name, set.Format, names(set), unmatched(set), c.want, c.unmatched)
		}
	}
}

// Split folders are often links to where the data is.
func TestLinkedSplitFolders(t *testing.T) {
	data, root := t.TempDir(), t.TempDir()
	touch(t, data, "imgs/city/a_leftImg8bit.png", "gt/city/a_gtFine_labelIds.png")
	for _, l := range [][2]string{{"imgs", "leftImg8bit/val"}, {"gt", "gtFine/val"}} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, l[1])), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(data, l[0]), filepath.Join(root, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	set, err := Open(root, Options{Split: "val"})
	if err != nil || len(set.Samples) != 1 || set.Samples[0].Image != filepath.Join(root, "leftImg8bit/val/city/a_leftImg8bit.png") {
		t.Fatalf("%+v, %v", set, err)
	}
}

func TestLayoutErrors(t *testing.T) {
	var ae *AmbiguousError
	both := t.TempDir()
	touch(t, both, "leftImg8bit/train/x/a_leftImg8bit.png", "gtFine/train/x/a_gtFine_labelIds.png",
		"JPEGImages/a.jpg", "SegmentationClass/a.png")
	if _, err := Open(both, Options{Split: "train"}); !errors.As(err, &ae) ||
		!strings.Contains(err.Error(), "cityscapes (leftImg8bit/ and gtFine/) and voc (JPEGImages/ and SegmentationClass/)") {
		t.Errorf("two layouts: %v", err)
	}
	if set, err := Open(both, Options{Split: "train", Format: "cityscapes"}); err != nil || len(set.Samples) != 1 {
		t.Errorf("--format cityscapes: %v, %v", set, err)
	}
	twoImages := t.TempDir()
	touch(t, twoImages, "images/a.jpg", "imgs/a.jpg", "masks/a.png")
	if _, err := Open(twoImages, Options{}); !errors.As(err, &ae) || !strings.Contains(err.Error(), "images/ and imgs/ and masks/") {
		t.Errorf("two image folders: %v", err)
	}
	if _, err := Open(t.TempDir(), Options{}); !errors.Is(err, ErrUnknownLayout) {
		t.Errorf("empty folder: %v", err)
	}
	if _, err := Open(both, Options{Format: "kitti"}); err == nil || !strings.Contains(err.Error(), "cityscapes, voc, ade20k, coco, cvat, cvat-xml, labelstudio, labelme, folders") {
		t.Errorf("unknown format: %v", err)
	}
	dupImages := t.TempDir()
	touch(t, dupImages, "images/a.jpg", "images/a.png", "masks/a.png")
	if _, err := Open(dupImages, Options{}); err == nil || !strings.Contains(err.Error(), "images/a.jpg") || !strings.Contains(err.Error(), "images/a.png") {
		t.Errorf("two images named a: %v", err)
	}
	twoMasks := t.TempDir()
	touch(t, twoMasks, "images/a.jpg", "masks/a_mask.png", "masks/a_labelIds.png")
	if _, err := Open(twoMasks, Options{}); err == nil || !strings.Contains(err.Error(), "several masks") {
		t.Errorf("two masks for a: %v", err)
	}
	flat := t.TempDir()
	touch(t, flat, "images/a.jpg", "masks/a.png")
	var se *SplitError
	if _, err := Open(flat, Options{Split: "val"}); !errors.As(err, &se) || !strings.Contains(err.Error(), "has no splits") {
		t.Errorf("split of a flat layout: %v", err)
	}
	if _, err := Open(filepath.Join(flat, "images", "a.jpg"), Options{}); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("a file as root: %v", err)
	}
}

// toyFormat stands for an annotation decoder: one JSON file of labels,
// rasterised by Decode.
type toyFormat struct{}

func (toyFormat) Name() string { return "toy" }
func (toyFormat) Detect(root string) string {
	if _, err := os.Stat(filepath.Join(root, "toy.json")); err == nil {
		return "toy.json"
	}
	return ""
}
func (toyFormat) Splits(string) ([]string, error) { return nil, nil }
func (toyFormat) List(root string, _ Options) (*Set, error) {
	ann := filepath.Join(root, "toy.json")
	return &Set{Samples: []Sample{{Image: filepath.Join(root, "a.png"), Mask: ann, Name: "a",
		Decode: func(opt imageio.MaskOptions) (*imageio.Mask, error) {
			g := image.NewGray(image.Rect(0, 0, 2, 1))
			g.Pix[1] = 7
			return imageio.MaskFromImage(g, ann, opt)
		}}}}, nil
}

func TestRegisterDecoder(t *testing.T) {
	Register(toyFormat{})
	t.Cleanup(func() {
		mu.Lock()
		registered = slices.DeleteFunc(registered, func(f Format) bool { return f.Name() == "toy" })
		mu.Unlock()
	})
	root := t.TempDir()
	touch(t, root, "toy.json", "a.png")
	set, err := Open(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	lm, _ := imageio.ParseLabelMap("7:1")
	m, err := set.Samples[0].ReadMask(imageio.MaskOptions{Map: lm, NumClasses: 2, Ignore: 255})
	if set.Format != "toy" || err != nil || !slices.Equal(m.Labels, []int32{0, 1}) {
		t.Errorf("%s: %v, %v", set.Format, m, err)
	}
	if !slices.Contains(Formats(), "toy") {
		t.Errorf("Formats() = %v", Formats())
	}
}

// A VOC SegmentationClass PNG (written by testdata/voc/gen_palette_png.py
// without Go's encoder) reads as its palette indices, not its colours:
// person is index 15 although its colour is (192,128,128), and the
// border colour (224,224,192) is index 255, the ignore label.
func TestVOCPaletteMaskReadsIndices(t *testing.T) {
	root := t.TempDir()
	touch(t, root, "JPEGImages/2007_000032.jpg", "ImageSets/Segmentation/val.txt")
	if err := os.WriteFile(filepath.Join(root, "ImageSets/Segmentation/val.txt"), []byte("2007_000032\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "voc", "voc_palette_mask.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "SegmentationClass"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "SegmentationClass", "2007_000032.png"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := Open(root, Options{Split: "val"})
	if err != nil || len(set.Samples) != 1 {
		t.Fatalf("%v, %v", set, err)
	}
	voc, _ := imageio.ParseLabelMap("voc")
	m, err := set.Samples[0].ReadMask(imageio.MaskOptions{Map: voc, NumClasses: 21, Ignore: 255})
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{0, 1, 15, 20, 255, 255, 7, 7, 0, 0, 3, 255}
	if m.Width != 6 || m.Height != 2 || !slices.Equal(m.Labels, want) {
		t.Errorf("labels %v, want %v", m.Labels, want)
	}
	img, err := imageio.Decoder{}.ReadFile(set.Samples[0].Mask)
	if err != nil {
		t.Fatal(err)
	}
	if r, g, b, _ := img.At(2, 0).RGBA(); r>>8 != 192 || g>>8 != 128 || b>>8 != 128 {
		t.Errorf("index 15 has colour %d,%d,%d; VOC's person is 192,128,128", r>>8, g>>8, b>>8)
	}
}

// Folder names are found whatever their case, as on macOS and Windows,
// whose file systems ignore it (a set made there has Images/ and Masks/);
// file names pair as spelled, on every system, and an image whose mask
// differs from it only in case is named with it (#45).
func TestCaseOfNames(t *testing.T) {
	cases := []struct {
		name, split string
		files       []string
		want        []string
		unmatched   []string
	}{
		{"capitalised folders", "", []string{"Images/a.jpg", "Masks/a.png"}, []string{"a"}, nil},
		{"capitalised per split", "train", []string{"IMAGES/train/a.JPG", "Labels/train/a.PNG", "IMAGES/val/b.jpg", "Labels/val/b.png"}, []string{"a"}, nil},
		{"capitalised split first", "val", []string{"Val/Images/a.jpeg", "Val/Masks/a.png"}, []string{"a"}, nil},
		{"upper-case extensions", "", []string{"images/a.JPEG", "images/b.Png", "masks/a.PNG", "masks/b_MASK.png", "masks/b_mask.PNG"}, []string{"a", "b"}, []string{"b_MASK.png"}},
		{"names differ in case", "", []string{"images/Frame1.jpg", "masks/frame1.png"}, nil, []string{"Frame1.jpg", "frame1.png"}},
	}
	for _, c := range cases {
		root := t.TempDir()
		touch(t, root, c.files...)
		set, err := Open(root, Options{Split: c.split})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if set.Format != "folders" || !slices.Equal(names(set), c.want) || !slices.Equal(unmatched(set), c.unmatched) {
			t.Errorf("%s: %s %v, unmatched %v; want %v, %v", c.name, set.Format, names(set), unmatched(set), c.want, c.unmatched)
		}
		if c.name == "names differ in case" {
			if why := set.Unmatched[0].Why; !strings.Contains(why, "frame1.png differs from it only in case") {
				t.Errorf("%s: %q, want the mask named as differing only in case", c.name, why)
			}
		}
	}
	// Two folders whose names differ only in case (possible on Linux
	// alone) are refused as ambiguous, never one of them silently taken.
	root := t.TempDir()
	touch(t, root, "images/a.jpg", "Images/a.jpg", "masks/a.png")
	var ae *AmbiguousError
	if _, err := Open(root, Options{}); !errors.As(err, &ae) {
		t.Errorf("images/ and Images/: error %v, want an AmbiguousError", err)
	}
}
