package pathguard

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/segtune/segtune/internal/storage"
)

func TestOverlapping(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	os.Mkdir(a, 0o755)
	os.Symlink(a, filepath.Join(dir, "link"))
	local := func(p string) *storage.Folder {
		f, err := storage.OpenFolder(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	bucket := func(scheme, b, key string) *storage.Folder {
		return storage.NewBucketFolder(memblob.OpenBucket(nil), storage.Location{Scheme: scheme, Bucket: b, Key: key}, true)
	}
	cases := []struct {
		x, y *storage.Folder
		want bool
	}{
		{local(a), local(a), true},
		{local(a), local(filepath.Join(dir, "link", "masks")), true},
		{local(filepath.Join(dir, "link")), local(dir), true},
		{local(a), local(filepath.Join(dir, "ab")), false},
		{bucket("s3", "b", "data"), bucket("s3", "b", "data/masks"), true},
		{bucket("s3", "b", "data/masks/"), bucket("s3", "b", "data"), true},
		{bucket("s3", "b", ""), bucket("s3", "b", "data"), true},
		{bucket("s3", "b", "data"), bucket("s3", "b", "data2"), false},
		{bucket("s3", "b", "data"), bucket("s3", "c", "data"), false},
		{bucket("s3", "b", "data"), bucket("gs", "b", "data"), false},
		{local(a), bucket("s3", "b", a), false},
	}
	for _, tc := range cases {
		for _, pair := range [][2]*storage.Folder{{tc.x, tc.y}, {tc.y, tc.x}} {
			got, err := Overlapping(pair[0], pair[1])
			if err != nil || got != tc.want {
				t.Errorf("Overlapping(%s, %s) = %v, %v; want %v", pair[0], pair[1], got, err, tc.want)
			}
		}
	}
}
