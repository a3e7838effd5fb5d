package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
)

// The folder operations against a real S3-compatible server (MinIO,
// started for the test): listing, all-or-nothing writes, reads, and the
// errors of a wrong secret and of a missing bucket.
func TestMinIOFolder(t *testing.T) {
	m := testassets.RequireMinIO(t)
	url := m.Bucket(t, "segtune-storage")
	ctx := context.Background()
	f, err := OpenFolder(ctx, url("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.CheckList(ctx); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < 25; i++ {
		name := fmt.Sprintf("img%03d.png", i)
		want = append(want, name)
		if err := f.Write(ctx, name, func(w io.Writer) error { _, err := fmt.Fprintf(w, "image %d", i); return err }); err != nil {
			t.Fatal(err)
		}
	}
	f.Sub("sub").Write(ctx, "deep.png", func(w io.Writer) error { return nil })
	if got := collect(t, f.List(ctx)); !slices.Equal(got, want) {
		t.Errorf("listed %v", got)
	}
	if data, err := f.ReadAll(ctx, "img007.png", 100); err != nil || string(data) != "image 7" {
		t.Errorf("read back %q, %v", data, err)
	}
	boom := errors.New("encoder failed")
	err = f.Write(ctx, "partial.png", func(w io.Writer) error {
		w.Write([]byte(strings.Repeat("x", 1<<20)))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("failed write: %v", err)
	}
	if ok, err := f.Exists(ctx, "partial.png"); ok || err != nil {
		t.Errorf("an aborted upload left an object (exists %v, %v)", ok, err)
	}
	if _, err := f.Open(ctx, "nothing.png"); !IsNotExist(err) {
		t.Errorf("missing object: %v", err)
	}
	if err := f.CheckAccess(ctx); err != nil {
		t.Error(err)
	}

	missing, err := OpenFolder(ctx, strings.Replace(url("in"), "segtune-storage", "no-such-bucket", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer missing.Close()
	if err := missing.CheckList(ctx); err == nil || !strings.Contains(err.Error(), "s3://no-such-bucket/in") {
		t.Errorf("missing bucket: %v", err)
	}

	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	bad, err := OpenFolder(ctx, url("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	for _, check := range []func(context.Context) error{bad.CheckList, bad.CheckAccess} {
		if err := check(ctx); err == nil || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
			t.Errorf("wrong secret: %v, want an error saying where credentials come from", err)
		}
	}
}
