package folder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/annot"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
)

// Request is a folder's segmentation as its user asks for it: the values
// a program's settings give, by name, without its flags.
type Request struct {
	Input, Output string // the folders (storage.OpenFolder): paths or bucket URLs
	// Options say how it runs: Batch, Overwrite, Shard and SkipExisting as
	// given; Prepare sets the rest.
	Options
	Overlay bool    // also write overlays
	Alpha   float64 // the overlays' opacity
	// Palette is a palette image to colour the masks; "" is the model's
	// settings' palette (imageio.Sidecar.MaskPalette).
	Palette string
	// Annotations are the pre-annotation formats, comma-separated ("":
	// none), ClassNames their class names (nil: the model's).
	Annotations string
	ClassNames  []string
	// Notes receives notices ("segtune: " lines); nil: none. Name calls a
	// setting what the user knows it by, in notices and the failures'
	// advice; nil: by its key.
	Notes io.Writer
	Name  func(key string) string
}

// Plan is a Request ready to run: its folders open and checked, the
// model's settings read, its annotations planned and its images listed.
type Plan struct {
	In, Out  *storage.Folder
	Settings imageio.Sidecar // the model's settings
	Listing  Listing
	Options  Options
	exp      *annot.ExportOptions
	req      Request
}

// Prepare does, in order, all that can refuse r before its model is
// opened: it opens and checks the folders, reads the model's settings
// (settings), plans the annotations, reads the palette and lists the
// images. What the user must change is a usage error (setting.Usage); a
// folder without images a *NoImagesError. On an error the folders it
// opened are closed; the plan's stay open until Close.
func Prepare(ctx context.Context, r Request, settings func() (imageio.Sidecar, error)) (*Plan, error) {
	if r.Notes == nil {
		r.Notes = io.Discard
	}
	if r.Name == nil {
		r.Name = setting.Key
	}
	p := &Plan{req: r, Options: r.Options}
	if err := p.prepare(ctx, settings); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// prepare is Prepare's work on p.
func (p *Plan) prepare(ctx context.Context, settings func() (imageio.Sidecar, error)) (err error) {
	r := p.req
	if p.In, err = storage.OpenSetting(ctx, "input", r.Input, true); err != nil {
		return setting.Usage(err)
	}
	if p.Out, err = storage.OpenSetting(ctx, "output", r.Output, false); err != nil {
		return setting.Usage(err)
	}
	if err := CheckFolders(p.In, p.Out); err != nil {
		return refused(err)
	}
	if p.Settings, err = settings(); err != nil {
		return err
	}
	if r.Annotations != "" {
		req := AnnotationRequest{Formats: r.Annotations, Classes: r.ClassNames, ModelClasses: p.Settings.Classes, Overwrite: r.Overwrite, Sharded: r.Shard.Source != ""}
		if p.exp, err = PlanAnnotations(req, p.In, p.Out); err != nil {
			return setting.Usage(err)
		}
	}
	p.Options.Notef = func(f string, a ...any) { fmt.Fprintf(r.Notes, "segtune: "+f+"\n", a...) }
	if p.Options.Palette, err = p.Settings.MaskPalette(r.Palette); err != nil {
		return err
	}
	if r.Overlay {
		p.Options.Overlay = &imageio.OverlayOptions{Alpha: r.Alpha, Skip: []uint8{0}}
	}
	if p.Listing, err = List(ctx, p.In, p.Out, p.Options); err != nil {
		return refused(err)
	}
	return nil
}

// refused is a folder check's or listing's err as what it asks of the
// user: a folder, or the outputs there, refused by a setting is a usage
// error (setting.Usage); a folder without images, or one that fails, stays as it is.
func refused(err error) error {
	var n setting.Namer
	if errors.As(err, new(*NoImagesError)) || !errors.As(err, &n) {
		return err
	}
	return setting.Usage(err)
}

// Close closes the plan's folders.
func (p *Plan) Close() {
	for _, f := range []*storage.Folder{p.In, p.Out} {
		if f != nil {
			f.Close()
		}
	}
}

// Use readies the plan for seg: the batch fitted to the model's fixed
// batch size (noted), the palette and the annotations' class names
// checked against its classes.
func (p *Plan) Use(seg *inference.Segmenter) error {
	p.Options.Batch = seg.FitBatch(p.req.Batch, p.req.Notes, p.req.Name)
	if err := seg.CheckPalette(p.Options.Palette); err != nil {
		return err
	}
	if err := CheckAnnotationClasses(p.exp, seg.Contract.Classes); err != nil {
		return setting.Usage(err)
	}
	return nil
}

// Bar shows a run's progress: the images done, and its end.
type Bar interface {
	Set(done int) error
	Finish() error
}

// Run segments the plan's images with seg (after Use), shown on bar,
// writes the annotations asked for and returns the run's summary. Images
// that could not be segmented are the summary's failures, their advice
// named by the request's Name; the error is the run's that could not go on.
func (p *Plan) Run(ctx context.Context, seg *inference.Segmenter, bar Bar) (Summary, error) {
	p.Options.Progress = func(done int) { bar.Set(done) }
	rep, err := Run(ctx, seg, p.In, p.Out, p.Listing, p.Options)
	bar.Finish()
	if err != nil {
		return Summary{}, fmt.Errorf("running %s: %w", seg.Name, err)
	}
	for i, f := range rep.Failures {
		rep.Failures[i].Err = setting.Rename(f.Err, p.req.Name)
	}
	if p.exp != nil {
		p.exp.Palette = p.Options.Palette
		n, err := WriteAnnotations(ctx, p.In, p.Out, *p.exp)
		if err != nil {
			return Summary{}, err
		}
		fmt.Fprintf(p.req.Notes, "segtune: %d images' annotations (%s) in %s\n", n, strings.Join(p.exp.Formats, ", "), p.Out.Path(""))
	}
	return Summarize(rep, seg.Session.Device, p.Options.Batch, p.req.Output, p.Options.Shard), nil
}
