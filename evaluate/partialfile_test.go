package evaluate_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/metrics"
)

// A retried shard finds its own complete partial and stops; a missing
// file means work to do; anything else there is refused, not overwritten.
func TestExistingPartial(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	setup := evaluate.Setup{Model: "m.onnx", ModelSHA256: "ab", Classes: 2, Ignore: 255,
		ClassNames: []string{}, SizeClasses: []int{}, Preprocess: []byte(`{}`)}
	mine := shard.Spec{Index: 0, Count: 2}
	var name string
	for _, n := range []string{"a.png", "b.png", "c.png", "d.png"} {
		if mine.Owns(n) {
			name = n
			break
		}
	}
	done := evaluate.NewPartial(mine, setup)
	conf, err := metrics.ScoreImage([]uint8{0, 1, 1}, []uint8{0, 1, 0}, 2, 255)
	if err != nil {
		t.Fatal(err)
	}
	done.Add(name, conf, 0)
	done.Images = 1
	path := filepath.Join(dir, "part-0.json")

	if old, err := evaluate.ExistingPartial(ctx, path, evaluate.NewPartial(mine, setup)); old != nil || err != nil {
		t.Fatalf("no file: got %v, %v; want nothing", old, err)
	}
	if err := evaluate.WritePartial(ctx, path, done); err != nil {
		t.Fatal(err)
	}
	old, err := evaluate.ExistingPartial(ctx, path, evaluate.NewPartial(mine, setup))
	if err != nil || old == nil || old.Images != 1 || old.Records[0].Image != name {
		t.Fatalf("the shard's own partial: got %+v, %v", old, err)
	}

	other := setup
	other.Classes = 3
	junk := filepath.Join(dir, "notes.json")
	if err := os.WriteFile(junk, []byte("my notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       *evaluate.Partial
		says       string
	}{
		{"another shard", path, evaluate.NewPartial(shard.Spec{Index: 1, Count: 2}, setup),
			path + " holds shard 0/2, and this is shard 1/2: give each shard its own file"},
		{"another evaluation", path, evaluate.NewPartial(mine, other),
			path + " holds another evaluation's scores (it differs in classes (2 and 3)); not overwriting it"},
		{"not a partial", junk, evaluate.NewPartial(mine, setup),
			junk + " exists and is not this evaluation's partial file (" + junk + ": not a segtune eval partial"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := evaluate.ExistingPartial(ctx, tc.path, tc.want)
			var pe *evaluate.PartialFileError
			if !errors.As(err, &pe) || !pe.Conflict || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want a conflict saying %q", err, tc.says)
			}
		})
	}
	var parseErr *evaluate.PartialError
	if _, err := evaluate.ExistingPartial(ctx, junk, done); !errors.As(err, &parseErr) || parseErr.File != junk {
		t.Fatalf("not a partial: %v does not wrap the *PartialError", err)
	}
	if _, err := evaluate.ExistingPartial(ctx, "ftp://host/p.json", done); err == nil || !strings.Contains(err.Error(), "ftp://host/p.json: unsupported URL scheme") {
		t.Fatalf("unsupported location: got %v", err)
	}
	if data, err := os.ReadFile(junk); err != nil || string(data) != "my notes" {
		t.Fatalf("the refused file changed: %q, %v", data, err)
	}
}

// TestExistingPartialRefusesAPlaceItCannotWrite: a --partial where no file
// can be written fails before the work (a hostile round found a read-only
// place failing only after the whole evaluation). /proc/self holds no
// such file and takes none, for root too.
func TestExistingPartialRefusesAPlaceItCannotWrite(t *testing.T) {
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("no /proc")
	}
	want := evaluate.NewPartial(shard.Spec{Index: 0, Count: 1}, evaluate.Setup{Model: "m.onnx", Classes: 2})
	path := "/proc/self/segtune-part.json"
	_, err := evaluate.ExistingPartial(context.Background(), path, want)
	var pe *evaluate.PartialFileError
	if !errors.As(err, &pe) || pe.Conflict || !strings.HasPrefix(err.Error(), path+": ") {
		t.Fatalf("got %v, want a *PartialFileError naming %s", err, path)
	}
}
