package evaluate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
)

// bucketFolders is an in-memory bucket holding images/ and masks/ with
// the given file names (empty files: pairing reads only names), as the
// folders s3://mem/images and s3://mem/masks.
func bucketFolders(t *testing.T, images, masks []string) (imgs, msks *storage.Folder) {
	t.Helper()
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { b.Close() })
	ctx := context.Background()
	for prefix, names := range map[string][]string{"images/": images, "masks/": masks} {
		for _, n := range names {
			if err := b.WriteAll(ctx, prefix+n, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	folder := func(key string) *storage.Folder {
		return storage.NewBucketFolder(b, storage.Location{Scheme: "s3", Bucket: "mem", Key: key}, false)
	}
	return folder("images"), folder("masks")
}

// localFolders writes the same names as files under a temporary folder.
func localFolders(t *testing.T, images, masks []string) (imgDir, maskDir string) {
	t.Helper()
	dir := t.TempDir()
	for sub, names := range map[string][]string{"images": images, "masks": masks} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, sub, n), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return filepath.Join(dir, "images"), filepath.Join(dir, "masks")
}

func collectPairs(t *testing.T, ctx context.Context, imgs, masks *storage.Folder, s shard.Spec) []datalayout.Sample {
	t.Helper()
	pairs, total, err := evaluate.FolderPairs(ctx, imgs, masks, s)
	if err != nil {
		t.Fatal(err)
	}
	var got []datalayout.Sample
	for p, err := range pairs {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	if len(got) != total {
		t.Fatalf("shard %s: %d pairs yielded, %d counted", s, len(got), total)
	}
	return got
}

// Streaming two bucket listings pairs exactly what imageio.PairDataset
// pairs on the same names in local folders (nested stems such as a and
// a.b included), and the shards of a job split the pairs between them.
func TestFolderPairsMatchLocalPairing(t *testing.T) {
	images := []string{"a.jpg", "a.b.png", "a.b.c.jpeg", "b.png", "c-1.png", "c.png", "d.PNG", "e.bmp", "notes.txt"}
	masks := []string{"a.png", "a.b.png", "a.b.c.png", "b.png", "c-1.png", "c.png", "d.png", "e.png", "readme.md"}
	imgDir, maskDir := localFolders(t, images, masks)
	pairing, err := imageio.PairDataset(imgDir, maskDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := pairing.Err(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range pairing.Pairs {
		want = append(want, filepath.Base(p.Image)+" "+filepath.Base(p.Mask))
	}
	slices.Sort(want)

	ctx := context.Background()
	imgs, msks := bucketFolders(t, images, masks)
	var got []string
	for _, p := range collectPairs(t, ctx, imgs, msks, shard.All) {
		if !strings.HasPrefix(p.Image, "s3://mem/images/") || !strings.HasPrefix(p.Mask, "s3://mem/masks/") {
			t.Fatalf("pair %v is not named by its URLs", p)
		}
		got = append(got, filepath.Base(p.Image)+" "+filepath.Base(p.Mask))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("bucket pairs %q,\nlocal pairing %q", got, want)
	}

	var sharded []string
	for k := range 3 {
		s := shard.Spec{Index: k, Count: 3}
		for _, p := range collectPairs(t, ctx, imgs, msks, s) {
			if !s.Owns(filepath.Base(p.Image)) {
				t.Fatalf("shard %s yielded %s, which it does not own", s, p.Image)
			}
			sharded = append(sharded, filepath.Base(p.Image)+" "+filepath.Base(p.Mask))
		}
	}
	slices.Sort(sharded)
	if !slices.Equal(sharded, want) {
		t.Fatalf("the shards' pairs %q, one run's %q", sharded, want)
	}
}

// What cannot be paired is refused before any pair is yielded, naming
// the files: unmatched images and masks (the first few), two images with
// one stem, no pairs at all, a folder that cannot be listed.
func TestFolderPairsRefusals(t *testing.T) {
	ctx := context.Background()
	var many []string
	for i := range 8 {
		many = append(many, fmt.Sprintf("x%d.png", i))
	}
	for _, tc := range []struct {
		name          string
		images, masks []string
		want          string
	}{
		{"unmatched", []string{"a.png", "b.png", "zz.png"}, []string{"a.png", "b.png", "m.png"},
			"data set pairing: 1 image(s) without a mask: s3://mem/images/zz.png; 1 mask(s) without an image: s3://mem/masks/m.png"},
		{"many unmatched", append([]string{"a.png"}, many...), []string{"a.png"},
			"8 image(s) without a mask: s3://mem/images/x0.png, s3://mem/images/x1.png, s3://mem/images/x2.png, s3://mem/images/x3.png, s3://mem/images/x4.png, and 3 more"},
		{"one stem twice", []string{"a.jpg", "a.png"}, []string{"a.png"},
			`s3://mem/images/a.jpg and s3://mem/images/a.png share the name "a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			imgs, masks := bucketFolders(t, tc.images, tc.masks)
			if _, _, err := evaluate.FolderPairs(ctx, imgs, masks, shard.All); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}

	imgs, masks := bucketFolders(t, []string{"a.png"}, []string{"b.png", "c.txt"})
	if _, _, err := evaluate.FolderPairs(ctx, imgs, masks, shard.All); err == nil || errors.Is(err, evaluate.ErrNoPairs) {
		t.Fatalf("unmatched files: got %v, want the pairing error", err)
	}
	imgs, masks = bucketFolders(t, nil, nil)
	if _, _, err := evaluate.FolderPairs(ctx, imgs, masks, shard.All); !errors.Is(err, evaluate.ErrNoPairs) {
		t.Fatalf("empty folders: got %v, want ErrNoPairs", err)
	}
	if _, _, err := evaluate.SamplePairs(nil, shard.All); !errors.Is(err, evaluate.ErrNoPairs) {
		t.Fatalf("no samples: got %v, want ErrNoPairs", err)
	}

	dir := t.TempDir()
	absent, err := storage.OpenFolder(ctx, filepath.Join(dir, "absent"))
	if err != nil {
		t.Fatal(err)
	}
	present, err := storage.OpenFolder(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var fe *evaluate.FolderError
	if _, _, err := evaluate.FolderPairs(ctx, present, absent, shard.All); !errors.As(err, &fe) || fe.Side != "masks" || fe.Folder != absent {
		t.Fatalf("absent masks folder: got %v, want a *FolderError of the masks", err)
	}
}

// The pairs are listed again as they are consumed: a folder that changed
// since the check ends the pairs with the pairing error.
func TestFolderPairsNoticeAChangedFolder(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { b.Close() })
	for _, k := range []string{"images/a.png", "images/b.png", "masks/a.png", "masks/b.png"} {
		if err := b.WriteAll(ctx, k, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	imgs := storage.NewBucketFolder(b, storage.Location{Scheme: "s3", Bucket: "mem", Key: "images"}, false)
	masks := storage.NewBucketFolder(b, storage.Location{Scheme: "s3", Bucket: "mem", Key: "masks"}, false)
	pairs, total, err := evaluate.FolderPairs(ctx, imgs, masks, shard.All)
	if err != nil || total != 2 {
		t.Fatalf("%d pairs, %v", total, err)
	}
	if err := b.Delete(ctx, "masks/b.png"); err != nil {
		t.Fatal(err)
	}
	var last error
	n := 0
	for _, err := range pairs {
		if err != nil {
			last = err
			break
		}
		n++
	}
	if n != 1 || last == nil || !strings.Contains(last.Error(), "1 image(s) without a mask: s3://mem/images/b.png") {
		t.Fatalf("%d pairs then %v, want 1 pair then the pairing error", n, last)
	}
}

// TestPairsByKindOfData: a data set's own pairs, two local folders paired
// whole, bucket folders streamed; each yields the shard's pairs only.
func TestPairsByKindOfData(t *testing.T) {
	ctx := context.Background()
	names := []string{"a.png", "b.png", "c.png", "d.png", "e.png", "f.png"}
	imgDir, maskDir := localFolders(t, names, names)
	s := shard.Spec{Index: 1, Count: 2}
	var want []string
	for _, n := range names {
		if s.Owns(n) {
			want = append(want, n)
		}
	}
	images := func(pairs func(func(datalayout.Sample, error) bool)) []string {
		var got []string
		for p, err := range pairs {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, filepath.Base(p.Image))
		}
		slices.Sort(got)
		return got
	}
	open := func(v string) *storage.Folder {
		f, err := storage.OpenFolder(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	bi, bm := bucketFolders(t, names, names)
	set := &datalayout.Set{Samples: []datalayout.Sample{{Image: "x/a.png", Mask: "y/a.png"}, {Image: "x/b.png", Mask: "y/b.png"}}}
	var wantSet []string
	for _, n := range []string{"a.png", "b.png"} {
		if s.Owns(n) {
			wantSet = append(wantSet, n)
		}
	}
	for _, c := range []struct {
		name        string
		set         *datalayout.Set
		imgs, masks *storage.Folder
		want        []string
	}{
		{"local folders", nil, open(imgDir), open(maskDir), want},
		{"bucket folders", nil, bi, bm, want},
		{"a data set", set, open(imgDir), open(maskDir), wantSet},
	} {
		pairs, n, err := evaluate.Pairs(ctx, c.set, c.imgs, c.masks, s)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := images(pairs); n != len(c.want) || !slices.Equal(got, c.want) {
			t.Errorf("%s: %d pairs %v; want %v", c.name, n, got, c.want)
		}
	}
	// A data set without pairs is not read as the folders'.
	if _, _, err := evaluate.Pairs(ctx, &datalayout.Set{}, open(imgDir), open(maskDir), s); !errors.Is(err, evaluate.ErrNoPairs) {
		t.Errorf("an empty data set: %v; want ErrNoPairs", err)
	}
}

// Two samples of one file name in different folders are named, both
// (a partial file records each image by its file name, and eval merge
// refused such partials after the run).
func TestUniqueNames(t *testing.T) {
	samples := []datalayout.Sample{{Image: "/d/a/x.png", Mask: "m1"}, {Image: "/d/b/y.png", Mask: "m2"}, {Image: "/d/b/x.png", Mask: "m3"}}
	err := evaluate.UniqueNames(samples)
	var se *evaluate.SameNameError
	if !errors.As(err, &se) || se.Name != "x.png" || !strings.Contains(err.Error(), "/d/a/x.png and /d/b/x.png") {
		t.Fatalf("got %v, want a SameNameError naming both images", err)
	}
	if err := evaluate.UniqueNames(samples[:2]); err != nil {
		t.Fatalf("distinct names: %v", err)
	}
}
