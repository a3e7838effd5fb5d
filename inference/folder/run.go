package folder

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image"
	"io"
	goruntime "runtime"
	"sync"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
)

// Options say how a folder is segmented.
type Options struct {
	// Palette colours the masks (and overlays); nil is Pascal VOC's.
	Palette imageio.Palette
	// Overlay, if set, also writes overlays/NAME.png: the mask's colours
	// over the image.
	Overlay *imageio.OverlayOptions
	// Batch is the images per model run, at most the model's fixed
	// batch size; less than 1 is 1.
	Batch int
	// Shard is this run's share of the images; the zero value is all.
	Shard shard.Spec
	// SkipExisting keeps an image's outputs that exist and check out
	// (complete PNGs of the image's size, the mask of the model's
	// classes) instead of segmenting it again.
	SkipExisting bool
	// Overwrite replaces files at the outputs' names that the run did not
	// write (ForeignOutputError); without it they are refused: before any
	// work when images and outputs are local folders, else when the
	// image's output is written.
	Overwrite bool
	// Notef, if set, is told of outputs found but made again.
	Notef func(format string, args ...any)
	// Progress, if set, is called with the images done so far.
	Progress func(done int)
}

// Segment segments the images of in that opts.Shard owns into out:
// CheckFolders, then List, then Run.
func Segment(ctx context.Context, seg *inference.Segmenter, in, out *storage.Folder, opts Options) (pipeline.Report, error) {
	if err := CheckFolders(in, out); err != nil {
		return pipeline.Report{}, err
	}
	l, err := List(ctx, in, out, opts)
	if err != nil {
		return pipeline.Report{}, err
	}
	return Run(ctx, seg, in, out, l, opts)
}

// Run segments the images of l, read from in, into masks (and overlays)
// in out. It returns an error only when the run cannot go on (the model
// fails on every image, the listing or the output folder fails); images
// that cannot be read or segmented are in the report's Failures.
func Run(ctx context.Context, seg *inference.Segmenter, in, out *storage.Folder, l Listing, opts Options) (pipeline.Report, error) {
	if err := seg.CheckPalette(opts.Palette); err != nil {
		return pipeline.Report{}, err
	}
	j := &job{ctx: ctx, seg: seg, in: in, out: out, opts: opts, checkOwn: !opts.Overwrite && !l.ownChecked, model: seg.MaskIdentity()}
	if err := out.MkdirAll(); err != nil {
		return pipeline.Report{}, err
	}
	if opts.Overlay != nil {
		j.overlays = out.Sub("overlays")
		if err := j.overlays.MkdirAll(); err != nil {
			return pipeline.Report{}, err
		}
	}
	st := seg.StagesFrom(j.read, j.finish)
	if opts.SkipExisting {
		prepare := st.Prepare
		st.Prepare = func(p string) (pipeline.Prepared, error) {
			if j.done(p) {
				return pipeline.Prepared{}, pipeline.ErrSkip
			}
			return prepare(p)
		}
	}
	// Opening the model left its file's bytes, their parsed protobuf and
	// the bytes given to ONNX Runtime behind (about four times the model's
	// size), and the heap's next collection was set while they lived:
	// collected now, their pages take the run's tensors instead of the heap
	// growing past them (peak RSS 407 → 386 MB on a 13 MB model with 1024²
	// inputs, bench/segment/RESULTS.md).
	goruntime.GC()
	return pipeline.RunSeq(l.Images, l.Total, st, pipeline.Config{
		Batch:          seg.BatchFor(opts.Batch),
		PrepareWorkers: pipeline.IOWorkers(!in.IsLocal()),
		FinishWorkers:  pipeline.IOWorkers(!out.IsLocal()),
		InFlight:       seg.InFlight(),
		Progress: func(done, _ int) {
			if opts.Progress != nil {
				opts.Progress(done)
			}
		},
	})
}

// job is one Run: where images come from and where masks go.
type job struct {
	ctx      context.Context
	seg      *inference.Segmenter
	in, out  *storage.Folder
	overlays *storage.Folder // nil without overlays
	opts     Options
	dec      imageio.Decoder
	// checkOwn: an existing output must be segment's own (checkOwn) to
	// be kept or replaced; List did not check them all before the run.
	checkOwn bool
	// model is seg's MaskIdentity, which the outputs carry: an earlier
	// output is kept only where it carries the same.
	model string
	// otherModel says once that outputs of another model are made again.
	otherModel sync.Once
}

// read decodes the image at p: a local path, or a URL in the bucket
// folder in.
func (j *job) read(p string) (image.Image, error) {
	if j.in.IsLocal() {
		return j.dec.ReadFile(p)
	}
	r, err := j.in.Open(j.ctx, baseName(p))
	if err != nil {
		return nil, fmt.Errorf("read image: %w", err)
	}
	defer r.Close()
	return j.dec.Decode(r, p)
}

// finish writes one image's mask (and overlay).
func (j *job) finish(r inference.Result) error {
	name := maskName(r.Path)
	mask, err := imageio.MaskImage(r.Labels, r.Width, r.Height, j.opts.Palette)
	if err != nil {
		return fmt.Errorf("write mask %s: %w", j.out.Path(name), err)
	}
	if err := j.write(j.out, name, mask); err != nil {
		return err
	}
	if j.overlays != nil {
		img, err := imageio.Overlay(r.Image, r.Labels, j.opts.Palette, *j.opts.Overlay)
		if err != nil {
			return err
		}
		return j.write(j.overlays, name, img)
	}
	return nil
}

// write writes img as the output name in f, marked as segment's own; a
// file there that is not is kept, and the image fails, unless
// opts.Overwrite.
func (j *job) write(f *storage.Folder, name string, img image.Image) error {
	if j.checkOwn {
		if err := checkOwn(j.ctx, f, name); err != nil {
			return err
		}
	}
	return f.Write(j.ctx, name, func(w io.Writer) error { return imageio.EncodeOutputPNG(w, img, j.model) })
}

func (j *job) notef(format string, args ...any) {
	if j.opts.Notef != nil {
		j.opts.Notef(format, args...)
	}
}

// done reports whether the image at p already has its outputs: the mask
// (and the overlay, if asked for) exist, were written by segment with
// this model and these settings (decodeOutput), decode completely, are the image's size,
// and the mask is a palette PNG of the model's classes. The name alone
// proves nothing: an output that does not check out is made again (with a
// notice).
func (j *job) done(p string) bool {
	name := maskName(p)
	m, ok := j.decodeOutput(j.out, name, p)
	if !ok {
		return false
	}
	again := func(why string, args ...any) bool {
		j.notef("%s %s: segmenting %s again", j.out.Path(name), fmt.Sprintf(why, args...), p)
		return false
	}
	mask, isMask := m.(*image.Paletted)
	if !isMask {
		return again("is not a palette PNG")
	}
	if k := j.seg.Contract.Classes; k > 0 {
		for _, v := range mask.Pix {
			if int(v) >= k {
				return again("holds label %d, and the model has %d classes", v, k)
			}
		}
	}
	cfg, err := j.imageConfig(p)
	if err != nil {
		return false // the pipeline reports the image
	}
	if b := mask.Bounds(); b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		return again("is %dx%d (WxH), the image %dx%d", b.Dx(), b.Dy(), cfg.Width, cfg.Height)
	}
	if j.overlays != nil {
		o, ok := j.decodeOutput(j.overlays, name, p)
		if !ok {
			return false
		}
		if b := o.Bounds(); b.Dx() != cfg.Width || b.Dy() != cfg.Height {
			return again("has an overlay of %dx%d (WxH), the image is %dx%d", b.Dx(), b.Dy(), cfg.Width, cfg.Height)
		}
	}
	return true
}

// decodeOutput decodes the output name in f, telling why not (except when
// it is missing, or not segment's: write refuses it, or with
// opts.Overwrite replaces it). An output segment wrote for another model
// or other settings (another MaskIdentity), or before outputs named them,
// is made again, as the masks may differ; one notice says so.
func (j *job) decodeOutput(f *storage.Folder, name, p string) (image.Image, bool) {
	r, err := f.Open(j.ctx, name)
	if err != nil {
		if !storage.IsNotExist(err) {
			j.notef("cannot read %s (%v): segmenting %s again", f.Path(name), err, p)
		}
		return nil, false
	}
	defer r.Close()
	br := bufio.NewReaderSize(r, markWindow)
	head, _ := br.Peek(markWindow)
	texts, _ := imageio.ReadPNGTexts(bytes.NewReader(head), imageio.OutputMarkKey, imageio.OutputModelKey)
	if texts[imageio.OutputMarkKey] != imageio.OutputMark {
		return nil, false
	}
	if model, ok := texts[imageio.OutputModelKey]; model != j.model {
		j.otherModel.Do(func() {
			why := "was made by another model or with other settings"
			if !ok {
				why = "was made by an older segtune, which did not record its model"
			}
			j.notef("%s %s: segmenting its image %s again, and every image whose outputs are such", f.Path(name), why, p)
		})
		return nil, false
	}
	img, err := j.dec.Decode(br, f.Path(name))
	if err != nil {
		j.notef("%v: segmenting %s again", err, p)
		return nil, false
	}
	return img, true
}

// imageConfig reads the size of the image at p from its header.
func (j *job) imageConfig(p string) (image.Config, error) {
	var r io.ReadCloser
	var err error
	if j.in.IsLocal() {
		r, _, err = regfile.Open(p)
	} else {
		r, err = j.in.Open(j.ctx, baseName(p))
	}
	if err != nil {
		return image.Config{}, err
	}
	defer r.Close()
	cfg, _, err := j.dec.Config(r, p)
	return cfg, err
}

// SegmentFiles segments the local image files paths, which the caller
// has chosen and checked, into the folder outDir (a path or a URL).
func SegmentFiles(ctx context.Context, seg *inference.Segmenter, paths []string, outDir string, opts Options) (pipeline.Report, error) {
	out, err := storage.OpenFolder(ctx, outDir)
	if err != nil {
		return pipeline.Report{}, err
	}
	defer out.Close()
	in, err := storage.OpenFolder(ctx, ".")
	if err != nil {
		return pipeline.Report{}, err
	}
	return Run(ctx, seg, in, out, Files(paths), opts)
}
