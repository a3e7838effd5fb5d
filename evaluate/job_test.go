package evaluate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/report"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/resolve"
)

// flagName calls a setting what a Go program's flag does.
func flagName(key string) string { return "-" + key }

// usage is err's message named by flagName when err is a usage error
// (exit status 2); it fails t otherwise.
func usage(t *testing.T, err error) string {
	t.Helper()
	var ue interface{ ExitCode() int }
	if !errors.As(err, &ue) || ue.ExitCode() != 2 {
		t.Fatalf("%v (%T): want a usage error", err, err)
	}
	return setting.Rename(err, flagName).Error()
}

// openers open folders from the disk and a data set whose split is
// samples, recording what they were asked.
func openers(t *testing.T, root string, samples []datalayout.Sample, asked *[]string) evaluate.Openers {
	return evaluate.Openers{
		Data: func(r string) (*datalayout.Set, error) {
			*asked = append(*asked, "data "+r)
			return &datalayout.Set{Root: root, Samples: samples}, nil
		},
		Folder: func(key, v string) (*storage.Folder, error) {
			*asked = append(*asked, key+" "+v)
			return storage.OpenFolder(context.Background(), v)
		},
	}
}

// Settings.Open refuses what Validate refuses as a usage error before
// opening anything; a data set's folder becomes the images and masks, and
// a confusion folder holding its files is a usage error too.
func TestSettingsOpen(t *testing.T) {
	dir := t.TempDir()
	val := filepath.Join(dir, "images", "val")
	samples := []datalayout.Sample{{Image: filepath.Join(val, "a.png"), Mask: filepath.Join(dir, "masks", "val", "a.png")}}
	os.MkdirAll(filepath.Dir(samples[0].Image), 0o755)
	os.MkdirAll(filepath.Dir(samples[0].Mask), 0o755)
	var asked []string
	s := evaluate.DefaultSettings()
	s.Data, s.Images = "d", "i"
	s.Given = func(k string) bool { return k == "data" || k == "images" }
	if _, err := s.Open(openers(t, dir, samples, &asked)); usage(t, err) != "give -data, or -images and -masks, not both" || len(asked) != 0 {
		t.Errorf("data and images: %v, opened %q", err, asked)
	}
	s = evaluate.DefaultSettings()
	s.Data, s.Confusion = "d", val
	_, err := s.Open(openers(t, dir, samples, &asked))
	if got := usage(t, err); got != "-confusion "+val+" holds -data's files; choose a folder of its own" {
		t.Errorf("confusion among the data's folders: %q", got)
	}
	if want := []string{"data d", "images " + dir, "masks " + dir}; fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("opened %q, want %q", asked, want)
	}
	s.Confusion = filepath.Join(dir, "conf")
	l, err := s.Open(openers(t, dir, samples, &asked))
	if err != nil || l.Set == nil || l.Images.String() != dir || s.Images != dir || s.Masks != dir {
		t.Fatalf("data set: %+v %v; settings %+v", l, err, s)
	}
	l.Close()
	if got := fmt.Sprint(s.Required()); got != "[model]" {
		t.Errorf("required with a data set: %s", got)
	}
	if s.Data = ""; fmt.Sprint(s.Required()) != "[model images masks]" {
		t.Errorf("required with folders: %v", s.Required())
	}
}

// A folder that cannot be paired is a usage error naming its setting; no
// pairs at all stays as it is (status 1).
func TestPairsError(t *testing.T) {
	f, err := storage.OpenFolder(context.Background(), "/no/such")
	if err != nil {
		t.Fatal(err)
	}
	err = evaluate.PairsError(fmt.Errorf("pairing: %w", &evaluate.FolderError{Side: "masks", Folder: f, Err: fs.ErrNotExist}))
	if got := usage(t, err); got != "-masks /no/such: file does not exist" {
		t.Errorf("folder error: %q", got)
	}
	var ue interface{ ExitCode() int }
	if err := evaluate.PairsError(evaluate.ErrNoPairs); err != evaluate.ErrNoPairs || errors.As(err, &ue) {
		t.Errorf("no pairs: %v", err)
	}
}

// synthJob is an evaluation of the synthetic model on 6 images, its
// notices and output in buffers.
func synthJob(t *testing.T, partial string, s shard.Spec) (evaluate.Job, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	_, samples := synthPlan(t) // requires ORT
	dir := t.TempDir()
	model := filepath.Join(dir, "synth.onnx")
	if err := os.WriteFile(model, models.SynthModel, 0o644); err != nil {
		t.Fatal(err)
	}
	set := evaluate.DefaultSettings()
	set.Model, set.Images, set.Masks, set.Partial = model, filepath.Dir(samples[0].Image), filepath.Dir(samples[0].Mask), partial
	set.Confusion = filepath.Join(dir, "confusion")
	var asked []string
	data, err := set.Open(openers(t, "", nil, &asked))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(data.Close)
	ms, err := resolve.ModelSettings(model, "", imageio.Sidecar{})
	if err != nil {
		t.Fatal(err)
	}
	var out, notes bytes.Buffer
	return evaluate.Job{Settings: set, Data: data, Shard: s, ModelSettings: ms.Sidecar,
		Open: func(p string, sc imageio.Sidecar) (*inference.Segmenter, error) {
			return resolve.OpenSegmenter(p, sc, resolve.SegmenterOptions{})
		},
		Print: report.Printer{Out: &out, Err: &notes, Prefix: "x: "}, Notes: &notes, Quiet: true, Name: flagName}, &out, &notes
}

// A job writes its shard's partial file and the confusion files, saying
// so; run again, it finds its partial complete and does nothing (printing
// the JSON summary when asked); another shard's job refuses the file.
func TestJobResumesItsPartial(t *testing.T) {
	ctx := context.Background()
	partial := filepath.Join(t.TempDir(), "p.json")
	half := shard.Spec{Index: 1, Count: 2}
	job, out, notes := synthJob(t, partial, half)
	if err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("x: wrote shard 1/2's scores to %s\n"+
		"x: the scores below are shard 1/2's alone; `segtune eval merge` combines the shards' -partial files\n"+
		"x: wrote the confusion matrix to %s\n", partial, job.Confusion)
	if notes.String() != want || !strings.Contains(out.String(), "images scored in") {
		t.Errorf("notes %q, want %q; out %q", notes.String(), want, out.String())
	}
	if _, err := os.Stat(filepath.Join(job.Confusion, "confusion.csv")); err != nil {
		t.Error(err)
	}
	first, err := evaluate.ReadPartial(ctx, partial)
	if err != nil || first.Shard != half {
		t.Fatalf("partial %+v: %v", first, err)
	}
	out.Reset()
	notes.Reset()
	job.Print.JSON = true
	if err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var sum evaluate.Summary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil || sum.Images != first.Images {
		t.Errorf("done: summary %q (%v); want %d images", out.String(), err, first.Images)
	}
	if want := "x: " + partial + " already holds shard 1/2 of this evaluation: nothing to do\n"; notes.String() != want {
		t.Errorf("done: notes %q, want %q", notes.String(), want)
	}
	job.Shard = shard.Spec{Index: 0, Count: 2}
	err = job.Run(ctx)
	if got, want := usage(t, err), "-partial "+partial+" holds shard 1/2, and this is shard 0/2"; !strings.HasPrefix(got, want) {
		t.Errorf("another shard: %q, want %q…", got, want)
	}
}
