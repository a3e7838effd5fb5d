package deploy

import (
	"errors"
	"fmt"
	"image"
	"strings"
	"sync"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
)

// CheckOptions say what an exported model is compared on.
type CheckOptions struct {
	// Images are the images both models segment; Source says where they
	// come from (for the report).
	Images []string
	Source string
	// Masks maps an image to its mask; nil or missing entries mean no
	// scoring against ground truth for that image.
	Masks map[string]string
	// LabelMap, MaskPalette (for RGB colour masks), Ignore and Names are
	// how masks are read and classes named.
	LabelMap    *imageio.LabelMap
	MaskPalette imageio.Palette
	Ignore      int
	Names       []string
	// Session configures the exported model's sessions.
	Session runtime.Options
	// Calibration is what an int8 model was calibrated on (nil for other
	// precisions): the report says whether the check is on other images.
	Calibration *ImageSet
}

// Check is the comparison of an exported model with its float model.
type Check struct {
	Images int    `json:"images"`
	Source string `json:"source"`
	// Paths are the images compared.
	Paths []string `json:"image_paths"`
	// CalibrationImages counts the compared images (by content) an int8
	// model was calibrated on; nil for other precisions. 0 is a check on
	// held-out images; more overstates the agreement on new images.
	CalibrationImages *int `json:"calibration_images_checked,omitempty"`
	// PixelAgreement is the share of pixels, over all images, where the
	// two models predict the same class; WorstImage the image where they
	// agree least and WorstAgreement its share.
	PixelAgreement float64 `json:"pixel_agreement"`
	WorstImage     string  `json:"worst_image"`
	WorstAgreement float64 `json:"worst_image_agreement"`
	// Float and Exported score each model against the masks.
	Float    *metrics.Report `json:"float,omitempty"`
	Exported *metrics.Report `json:"exported,omitempty"`
	// MeanIoUDelta is Exported − Float mean IoU (nil without masks).
	MeanIoUDelta *float64 `json:"mean_iou_delta,omitempty"`
	// FloatImagesPerSec and ExportedImagesPerSec are inference rates on
	// these images (model time only, batch 1; a rough speed indication,
	// bench/precision measures it properly).
	FloatImagesPerSec    float64 `json:"float_images_per_s"`
	ExportedImagesPerSec float64 `json:"exported_images_per_s"`
	// Contract is the exported model's contract, equal to the float one's.
	Contract *contract.Contract `json:"contract"`
	Kernels  *Kernels           `json:"ort_kernels"`
}

// CheckExport opens the exported model in ONNX Runtime, checks that it
// keeps ref's contract (read with the same overrides), and runs both on
// o.Images. ref is the float model's segmenter; exp and data are the
// exported model and its serialized bytes.
func CheckExport(ref *inference.Segmenter, exp *onnx.Model, data []byte, ov contract.Overrides, o CheckOptions) (*Check, error) {
	if len(o.Images) == 0 {
		return nil, fmt.Errorf("no images to check the exported model on")
	}
	seg, err := openExported(ref, exp, data, ov, o.Session)
	if err != nil {
		return nil, err
	}
	defer seg.Close()
	ct := seg.Contract
	c := &Check{Images: len(o.Images), Source: o.Source, Paths: o.Images, Contract: ct}
	if o.Calibration != nil {
		n, err := o.Calibration.Overlap(o.Images)
		if err != nil {
			return nil, err
		}
		c.CalibrationImages = &n
	}
	c.Kernels = ReadKernels(data, o.Session)

	classes := max(ref.Contract.Classes, 2)
	withMasks := len(o.Masks) > 0
	refConf, expConf := metrics.NewConfusion(classes, o.Ignore), metrics.NewConfusion(classes, o.Ignore)
	var mu sync.Mutex
	labels := map[string][]uint8{}
	addMask := func(conf *metrics.Confusion, r inference.Result) error {
		mp, ok := o.Masks[r.Path]
		if !withMasks || !ok {
			return nil
		}
		mask, err := imageio.ReadMask(mp, imageio.MaskOptions{Map: o.LabelMap, Palette: o.MaskPalette, Width: r.Width, Height: r.Height,
			NumClasses: classes, Ignore: int32(o.Ignore)})
		if err != nil {
			return err
		}
		target, err := mask.Uint8(nil)
		if err != nil {
			return fmt.Errorf("%s: %w", mp, err)
		}
		local, err := metrics.ScoreImage(r.Labels, target, classes, o.Ignore)
		if err != nil {
			return fmt.Errorf("%s: %w", mp, err)
		}
		mu.Lock()
		conf.Merge(local)
		mu.Unlock()
		return nil
	}
	run := func(s *inference.Segmenter, finish func(inference.Result) error) (float64, error) {
		rep, err := pipeline.Run(o.Images, s.Stages(imageio.Decoder{}, finish), pipeline.Config{Batch: 1})
		if err != nil {
			return 0, err
		}
		if len(rep.Failures) > 0 {
			f := rep.Failures[0]
			return 0, fmt.Errorf("%d of %d check images failed, first %s: %w", len(rep.Failures), rep.Total, f.Path, f.Err)
		}
		if rep.InferElapsed <= 0 {
			return 0, nil
		}
		return float64(rep.Succeeded) / rep.InferElapsed.Seconds(), nil
	}
	c.FloatImagesPerSec, err = run(ref, func(r inference.Result) error {
		mu.Lock()
		labels[r.Path] = r.Labels
		mu.Unlock()
		return addMask(refConf, r)
	})
	if err != nil {
		return nil, fmt.Errorf("float model: %w", err)
	}
	var same, total int64
	c.WorstAgreement = 2
	c.ExportedImagesPerSec, err = run(seg, func(r inference.Result) error {
		mu.Lock()
		want := labels[r.Path]
		mu.Unlock()
		if len(want) != len(r.Labels) {
			return fmt.Errorf("%s: the models' predictions differ in size (%d and %d pixels)", r.Path, len(want), len(r.Labels))
		}
		var n int64
		for i, v := range r.Labels {
			if want[i] == v {
				n++
			}
		}
		mu.Lock()
		same += n
		total += int64(len(want))
		if a := float64(n) / float64(max(len(want), 1)); a < c.WorstAgreement {
			c.WorstAgreement, c.WorstImage = a, r.Path
		}
		mu.Unlock()
		return addMask(expConf, r)
	})
	if err != nil {
		return nil, fmt.Errorf("exported model: %w", err)
	}
	if total > 0 {
		c.PixelAgreement = float64(same) / float64(total)
	}
	if withMasks {
		fr, er := metrics.NewReport(refConf, o.Names), metrics.NewReport(expConf, o.Names)
		c.Float, c.Exported = &fr, &er
		if fr.MeanIoU != nil && er.MeanIoU != nil {
			d := *er.MeanIoU - *fr.MeanIoU
			c.MeanIoUDelta = &d
		}
	}
	return c, nil
}

// openExported reads the exported model's contract (with the overrides
// ref's was read with), checks it keeps ref's, and opens it in ONNX
// Runtime with ref's preprocessing.
func openExported(ref *inference.Segmenter, exp *onnx.Model, data []byte, ov contract.Overrides, opts runtime.Options) (*inference.Segmenter, error) {
	ct, err := contract.Read(exp, ov)
	if err != nil {
		return nil, fmt.Errorf("the exported model's contract: %w", err)
	}
	if err := sameContract(ref.Contract, ct); err != nil {
		return nil, err
	}
	seg, err := inference.Open(data, ct, ref.Pre, opts)
	if err != nil {
		return nil, fmt.Errorf("ONNX Runtime rejects the exported model: %w", err)
	}
	return seg, nil
}

// syntheticSizes are the sizes (height, width) CheckRuns tries, in order:
// the first the float model runs at is the one checked. 224 suits
// windowed transformers (7×32), 256 powers of two, 64×48 the smallest.
var syntheticSizes = [][2]int{{224, 224}, {256, 256}, {64, 48}}

// syntheticImage is h×w pixels of smooth colour gradients, every channel
// different, so that a model whose scores break on some inputs (not only
// on blank ones) is likely caught.
func syntheticImage(h, w int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := img.PixOffset(x, y)
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = uint8(4*x), uint8(5*y), uint8(255-2*x-y), 255
		}
	}
	return img
}

// segmentOne runs s on img alone; the error is the image's failure.
func segmentOne(s *inference.Segmenter, name string, img image.Image) error {
	read := func(string) (image.Image, error) { return img, nil }
	rep, err := pipeline.Run([]string{name}, s.StagesFrom(read, func(inference.Result) error { return nil }), pipeline.Config{Batch: 1})
	if err != nil {
		return err
	}
	if len(rep.Failures) > 0 {
		return rep.Failures[0].Err
	}
	return nil
}

// CheckRuns is the check of an export with no images to compare on: the
// exported model is opened as in CheckExport and segments a synthetic
// image of the first size in syntheticSizes that the float model (ref)
// segments; an error (a *contract.NonFiniteError for NaN or ±Inf scores,
// the float model's included) says it does not run or its numbers are
// broken. checked names the image, "" when the float model runs at none
// of the sizes (then only opening the export was checked).
func CheckRuns(ref *inference.Segmenter, exp *onnx.Model, data []byte, ov contract.Overrides, opts runtime.Options) (checked string, err error) {
	seg, err := openExported(ref, exp, data, ov, opts)
	if err != nil {
		return "", err
	}
	defer seg.Close()
	for _, sz := range syntheticSizes {
		name := fmt.Sprintf("a synthetic %dx%d image", sz[1], sz[0])
		img := syntheticImage(sz[0], sz[1])
		if err := segmentOne(ref, name, img); err != nil {
			if nf := (*contract.NonFiniteError)(nil); errors.As(err, &nf) {
				return name, fmt.Errorf("the float model: %w", err)
			}
			continue // not a size this model takes
		}
		return name, segmentOne(seg, name, img)
	}
	return "", nil
}

// sameContract compares what callers rely on: the input, its layout and
// sizes, the output, its layout, kind and classes; an error names each
// that differs.
func sameContract(want, got *contract.Contract) error {
	var diffs []string
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"input", got.Input, want.Input}, {"input layout", got.InputLayout, want.InputLayout},
		{"batch", got.Batch, want.Batch}, {"height", got.Height, want.Height}, {"width", got.Width, want.Width},
		{"output", got.Output, want.Output}, {"output layout", got.OutputLayout, want.OutputLayout},
		{"output kind", got.Kind, want.Kind}, {"classes", got.Classes, want.Classes},
	} {
		if f.got != f.want {
			diffs = append(diffs, fmt.Sprintf("%s %v, want %v", f.name, f.got, f.want))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the exported model's contract differs from the float model's: %s", strings.Join(diffs, "; "))
	}
	return nil
}
