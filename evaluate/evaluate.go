package evaluate

import (
	"context"
	"fmt"
	"image"
	"iter"
	"sync"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
)

// Plan is one evaluation (or one shard of it).
type Plan struct {
	// Segmenter is the opened model; Run does not close it.
	Segmenter *inference.Segmenter
	// Setup says what is scored and how (classes, ignore label, size
	// classes) and identifies the evaluation in its partial.
	Setup Setup
	// Shard is the share of the images this run scores; Pairs yields only
	// that share's pairs, Total of them.
	Shard shard.Spec
	Pairs iter.Seq2[datalayout.Sample, error]
	Total int
	// LabelMap remaps mask values to classes (nil: none); MaskPalette
	// reads RGB colour masks (nil: label masks only).
	LabelMap    *imageio.LabelMap
	MaskPalette imageio.Palette
	// ReadImage and ReadMask read a pair's files; nil reads local files.
	ReadImage func(path string) (image.Image, error)
	ReadMask  func(s datalayout.Sample, opt imageio.MaskOptions) (*imageio.Mask, error)
	// Batch is the images per model run, PrepareWorkers the decoders (0:
	// the pipeline's default).
	Batch, PrepareWorkers int
	// Progress, if set, is told the images done.
	Progress func(done, total int)
	// Name, if set, is what the program's users call a setting (by its
	// key): each failed image's error is recorded naming them so.
	Name func(key string) string
}

// Run scores p's pairs and returns the shard's partial: the scored images'
// records, the failed images (an image or mask that cannot be read or
// scored fails alone) and the run's time and device. The error is the
// run's as a whole.
func Run(ctx context.Context, p Plan) (*Partial, error) {
	acc := NewPartial(p.Shard, p.Setup)
	var maskOf sync.Map // image path → its sample, while the image is under way
	paths := func(yield func(string, error) bool) {
		for s, err := range p.Pairs {
			if err != nil {
				yield("", err)
				return
			}
			maskOf.Store(s.Image, s)
			if ctx.Err() != nil {
				yield("", ctx.Err())
				return
			}
			if !yield(s.Image, nil) {
				return
			}
		}
	}
	readMask := p.ReadMask
	if readMask == nil {
		readMask = datalayout.Sample.ReadMask
	}
	var mu sync.Mutex
	finish := func(r inference.Result) error {
		v, _ := maskOf.LoadAndDelete(r.Path)
		sample, _ := v.(datalayout.Sample)
		mask, err := readMask(sample, imageio.MaskOptions{
			Map: p.LabelMap, Palette: p.MaskPalette, Width: r.Width, Height: r.Height,
			NumClasses: p.Setup.Classes, Ignore: int32(p.Setup.Ignore),
		})
		if err != nil {
			return err
		}
		target, err := mask.Uint8(nil)
		if err != nil {
			return fmt.Errorf("%s: %w", sample.Mask, err)
		}
		local, frac, err := p.Setup.Score(r.Labels, target)
		if err != nil {
			return fmt.Errorf("%s: %w", sample.Mask, err)
		}
		mu.Lock()
		acc.Add(baseName(r.Path), local, frac)
		mu.Unlock()
		return nil
	}
	read := p.ReadImage
	if read == nil {
		read = imageio.Decoder{}.ReadFile
	}
	stages := p.Segmenter.StagesFrom(read, finish)
	prepare := stages.Prepare
	stages.Prepare = func(path string) (pipeline.Prepared, error) {
		pr, err := prepare(path)
		if err != nil {
			maskOf.Delete(path) // the pipeline records the failure; Finish never comes
		}
		return pr, err
	}
	rep, err := pipeline.RunSeq(paths, p.Total, stages, pipeline.Config{
		Batch: p.Batch, PrepareWorkers: p.PrepareWorkers, Progress: p.Progress,
	})
	if err != nil {
		return nil, err
	}
	acc.Images, acc.Seconds, acc.Device = rep.Total, rep.Elapsed.Seconds(), p.Segmenter.Session.Device
	if p.Name != nil {
		for i, f := range rep.Failures {
			rep.Failures[i].Err = setting.Rename(f.Err, p.Name)
		}
	}
	acc.Failures = append(acc.Failures, pipeline.FailureRecords(rep.Failures)...)
	return acc, nil
}

// ReadFolders makes p read the pairs' files from imgs and masks, the
// folders (local or bucket) the pairs were listed from, with as many
// decoders as reading from them wants.
func (p *Plan) ReadFolders(ctx context.Context, imgs, masks *storage.Folder) {
	p.PrepareWorkers = pipeline.IOWorkers(!imgs.IsLocal() || !masks.IsLocal())
	if !imgs.IsLocal() {
		dec := imageio.Decoder{}
		p.ReadImage = func(path string) (image.Image, error) {
			r, err := imgs.Open(ctx, baseName(path))
			if err != nil {
				return nil, fmt.Errorf("read image: %w", err)
			}
			defer r.Close()
			return dec.Decode(r, path)
		}
	}
	if !masks.IsLocal() {
		p.ReadMask = func(s datalayout.Sample, opt imageio.MaskOptions) (*imageio.Mask, error) {
			r, err := masks.Open(ctx, baseName(s.Mask))
			if err != nil {
				return nil, fmt.Errorf("read mask: %w", err)
			}
			defer r.Close()
			return imageio.DecodeMask(r, s.Mask, opt)
		}
	}
}
