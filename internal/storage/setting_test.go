package storage

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/internal/setting"
)

// A folder a setting names is refused by that setting before any work:
// an input that is missing or a file, an output that is a file; a missing
// output is made later.
func TestOpenSetting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	flag := func(key string) string { return "--" + key }
	missing := filepath.Join(dir, "missing")
	for _, c := range []struct {
		key, v string
		input  bool
		want   string // "" opens
	}{
		{"input", dir, true, ""},
		{"output", missing, false, ""},
		{"input", missing, true, "--input " + missing + ": stat " + missing + ": no such file or directory"},
		{"output", file, false, "--output " + file + ": " + file + " is not a folder"},
		{"images", "s3:bucket", true, `--images s3:bucket: "s3:bucket" lacks the // of a URL: write s3://BUCKET/PREFIX, or ./s3:bucket for a local name`},
		{"masks", "", true, "--masks : empty path"},
	} {
		f, err := OpenSetting(ctx, c.key, c.v, c.input)
		if c.want == "" {
			if err != nil || f == nil {
				t.Errorf("%s %q: %v", c.key, c.v, err)
			} else {
				f.Close()
			}
			continue
		}
		if f != nil || err == nil || setting.Rename(err, flag).Error() != c.want {
			t.Errorf("%s %q: %v\nwant %s", c.key, c.v, setting.Rename(err, flag), c.want)
		}
	}
}
