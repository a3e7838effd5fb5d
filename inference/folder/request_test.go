package folder_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/shard"
)

func flagName(key string) string { return "--" + strings.ReplaceAll(key, "_", "-") }

// prepare runs Prepare of r with settings s, counting the settings read.
func prepare(t *testing.T, r folder.Request, s imageio.Sidecar) (*folder.Plan, int, error) {
	t.Helper()
	read := 0
	p, err := folder.Prepare(context.Background(), r, func() (imageio.Sidecar, error) { read++; return s, nil })
	if p != nil {
		t.Cleanup(p.Close)
	}
	return p, read, err
}

// What the user must change is refused before the model is read, as a
// usage error (exit status 2) naming the setting; a folder without
// images is not one (exit status 1); the model's settings are read only
// once the folders check out.
func TestPrepareRefusesBeforeTheModel(t *testing.T) {
	dir := t.TempDir()
	in, empty := filepath.Join(dir, "in"), filepath.Join(dir, "empty")
	writeImages(t, in, 1)
	os.Mkdir(empty, 0o755)
	file := filepath.Join(in, "img0.png")
	for _, c := range []struct {
		name string
		r    folder.Request
		want string // the error's message, settings named as flags
		read int    // settings read
	}{
		{"missing input", folder.Request{Input: filepath.Join(dir, "absent"), Output: filepath.Join(dir, "o")}, "--input " + filepath.Join(dir, "absent") + ": stat", 0},
		{"input a file", folder.Request{Input: file, Output: filepath.Join(dir, "o")}, "--input " + file + ": " + file + " is not a folder", 0},
		{"output a file", folder.Request{Input: in, Output: file}, "--output " + file + ": " + file + " is not a folder", 0},
		{"output inside the input", folder.Request{Input: in, Output: filepath.Join(in, "masks")}, "--output", 0},
		{"sharded annotations", folder.Request{Input: in, Output: filepath.Join(dir, "o"), Annotations: "coco", ClassNames: []string{"bg", "red"},
			Options: folder.Options{Shard: shard.Spec{Index: 0, Count: 2, Source: shard.SourceSetting}}}, "--annotations with --shard", 1},
		{"unknown annotation format", folder.Request{Input: in, Output: filepath.Join(dir, "o"), Annotations: "nope", ClassNames: []string{"bg"}}, "--annotations", 1},
	} {
		_, read, err := prepare(t, c.r, imageio.Sidecar{})
		var re interface{ ExitCode() int }
		if !errors.As(err, &re) || re.ExitCode() != 2 || !strings.HasPrefix(setting.Rename(err, flagName).Error(), c.want) {
			t.Errorf("%s: %v; want a usage error starting %q", c.name, setting.Rename(err, flagName), c.want)
		}
		if read != c.read {
			t.Errorf("%s: the model's settings read %d times, want %d", c.name, read, c.read)
		}
	}

	_, read, err := prepare(t, folder.Request{Input: empty, Output: filepath.Join(dir, "o")}, imageio.Sidecar{})
	var ne *folder.NoImagesError
	if !errors.As(err, &ne) || errors.As(err, new(interface{ ExitCode() int })) || read != 1 {
		t.Errorf("an empty input: %v (settings read %d times); want a *NoImagesError, not refused", err, read)
	}
	_, _, err = prepare(t, folder.Request{Input: in, Output: filepath.Join(dir, "o"), Palette: filepath.Join(dir, "absent.png")}, imageio.Sidecar{})
	if err == nil || errors.As(err, new(interface{ ExitCode() int })) || !strings.Contains(err.Error(), "absent.png") {
		t.Errorf("a missing palette: %v; want its read error", err)
	}
	bad := errors.New("bad settings")
	p, err := folder.Prepare(context.Background(), folder.Request{Input: in, Output: filepath.Join(dir, "o")}, func() (imageio.Sidecar, error) { return imageio.Sidecar{}, bad })
	if p != nil || err != bad {
		t.Errorf("settings that fail: %v, %v; want no plan and their error as it is", p, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "o")); err == nil {
		t.Error("a refused request made its output folder")
	}
}

// bar records a run's progress.
type bar struct {
	done     []int
	finished int
}

func (b *bar) Set(n int) error { b.done = append(b.done, n); return nil }
func (b *bar) Finish() error   { b.finished++; return nil }

// A plan segments its folder with the palette and overlays asked for,
// writes the annotations and says so, and sums the run up; the class
// names must fit the model.
func TestPlanRun(t *testing.T) {
	seg := redOverGreen(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	writeImages(t, in, 3)
	var notes bytes.Buffer
	r := folder.Request{Input: in, Output: out, Options: folder.Options{Batch: 2}, Overlay: true, Alpha: 0.3,
		Annotations: "coco", Notes: &notes, Name: flagName}
	palette := imageio.Palette{{0, 0, 0, 255}, {200, 10, 10, 255}}
	p, _, err := prepare(t, r, imageio.Sidecar{Classes: []string{"bg", "red"}, Palette: palette})
	if err != nil {
		t.Fatal(err)
	}
	if p.Listing.Total != 4 || len(p.Options.Palette) != 2 || p.Options.Overlay == nil || p.Options.Overlay.Alpha != 0.3 {
		t.Fatalf("plan: %d images, palette %v, overlay %+v", p.Listing.Total, p.Options.Palette, p.Options.Overlay)
	}
	if err := p.Use(seg); err != nil {
		t.Fatal(err)
	}
	var b bar
	sum, err := p.Run(context.Background(), seg, &b)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Images != 4 || sum.Succeeded != 3 || sum.Failed != 1 || sum.Batch != 2 || sum.Output != out || b.finished != 1 || len(b.done) != 4 {
		t.Errorf("summary %+v, bar %+v", sum, b)
	}
	checkMasks(t, out, 3)
	if _, err := os.Stat(filepath.Join(out, "overlays", "img0.png")); err != nil {
		t.Error(err)
	}
	if want := "segtune: 3 images' annotations (coco) in " + out + "\n"; notes.String() != want {
		t.Errorf("notes %q, want %q", notes.String(), want)
	}
	if _, err := os.Stat(filepath.Join(out, "coco", "annotations.json")); err != nil {
		t.Error(err)
	}

	r.Output, r.ClassNames, r.Overwrite = filepath.Join(dir, "out3"), []string{"bg", "red", "blue"}, true
	p, _, err = prepare(t, r, imageio.Sidecar{})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Use(seg)
	var re interface{ ExitCode() int }
	if !errors.As(err, &re) || setting.Rename(err, flagName).Error() != "--annotations: 3 class names (bg,red,blue) for a model of 2 classes" {
		t.Errorf("three names for two classes: %v; want a usage error", setting.Rename(err, flagName))
	}
}
