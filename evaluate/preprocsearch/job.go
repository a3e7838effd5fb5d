package preprocsearch

import (
	"context"
	"fmt"
	"io"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/report"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime"
)

// Job is a search as a program runs it (segtune info
// --find-preprocessing): Config's search of the model at Model, its
// labelled data opened with Openers; the result printed, and the chosen
// preprocessing saved as the model's sidecar when asked.
type Job struct {
	Config
	Model string
	// MaskOptions say how masks are read (their label map over the
	// model's); Session is how each candidate's model is run.
	MaskOptions imageio.MaskOptions
	Session     runtime.Options
	Openers     evaluate.Openers
	// Print prints the result (text or JSON on Out); its Prefix starts
	// each notice, written to Notes.
	Print report.Printer
	Notes io.Writer
	// Name is what the program calls a setting (by key), in the verdict
	// (nil: by key).
	Name func(key string) string
}

// CheckSidecar refuses, before any work, to write the sidecar over an
// existing one (RefuseExistingSidecar): a usage error (setting.Usage).
func (j Job) CheckSidecar() error {
	if !j.WriteSidecar {
		return nil
	}
	return setting.Usage(j.RefuseExistingSidecar(imageio.SidecarPath(j.Model)))
}

// Run searches with the model's own settings own (resolve.ModelSettings,
// no flags): it opens the model for the candidates, then the labelled
// data, scores them, prints the result and saves the choice if asked.
func (j Job) Run(ctx context.Context, own imageio.Sidecar) error {
	open := func(m string, s imageio.Sidecar) (*inference.Segmenter, error) {
		return resolve.OpenSegmenter(m, s, resolve.SegmenterOptions{Session: j.Session})
	}
	req, cands, err := j.Request(j.Model, own, j.MaskOptions, open)
	if err != nil {
		return err
	}
	req.Progress = func(done, total int, cand Candidate) {
		fmt.Fprintf(j.Notes, "%sscoring %d/%d: %s\n", j.Print.Prefix, done+1, total, cand.Name)
	}
	data, err := evaluate.OpenLabelled(j.Data, j.Images, j.Masks, j.Openers)
	if err != nil {
		return err
	}
	defer data.Close()
	req.Set, req.Images, req.Masks = data.Set, data.Images, data.Masks
	res, err := Search(ctx, req, cands)
	if err != nil {
		return evaluate.PairsError(err)
	}
	return j.report(res, own)
}

// report prints res and saves its choice into the sidecar when asked.
func (j Job) report(res *Result, own imageio.Sidecar) error {
	var err error
	if name := j.Name; j.Print.JSON {
		err = report.JSON(j.Print.Out, res)
	} else {
		if name == nil {
			name = setting.Key
		}
		res.WriteText(j.Print.Out, name)
	}
	if err != nil || !j.WriteSidecar {
		return err
	}
	chosen, sidecar := res.Scores[res.Chosen], imageio.SidecarPath(j.Model)
	if err := j.SaveSidecar(sidecar, own, chosen); err != nil {
		return err
	}
	fmt.Fprintf(j.Notes, "%swrote %s (%s)\n", j.Print.Prefix, sidecar, chosen.Name)
	return nil
}
