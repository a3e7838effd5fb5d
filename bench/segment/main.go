// Command segment measures what `segtune segment` costs on top of ONNX
// Runtime: the same images and batches are run (1) through a bare session on
// tensors prepared in advance and (2) through segtune's full pipeline, which
// decodes the images (PNG, or with -jpeg JPEG copies of them), preprocesses,
// runs the model, restores masks to image size and writes palette PNGs. The
// two are run alternately -runs times; the overhead is (2)/(1) − 1 of the
// medians. Beside them (3) the model alone on the same prepared batches, as
// the pipeline runs it (Segmenter.Infer: with its arg-max inside the graph,
// inference.OpenLabels, unless -host-argmax): inference's own images/s;
// and (4) bare with the scores written into one buffer kept from run to
// run (RunInto, no copy back to Go), as the pipeline does.
// -breakdown first times each stage of the pipeline on one goroutine (CPU
// milliseconds per image).
//
//	go run ./bench/segment -n 24 -batch 1 -runs 7 [-jpeg] [-threads 2] [-breakdown]
//	    [-model M -images DIR] [-device cuda] [-json] [-host-argmax]
//
// By default the model is the shared person model and the images CamVid's
// validation set; -model and -images name others (the GPU check runs a
// generated DeepLabV3+ on its CamVid subset), -device runs both sides on
// the CUDA provider, and -json prints one JSON object.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
)

func main() {
	n := flag.Int("n", 24, "images")
	batch := flag.Int("batch", 4, "batch size")
	runs := flag.Int("runs", 5, "repetitions (median reported)")
	threads := flag.Int("threads", 0, "ONNX Runtime threads (0 = all cores)")
	noSpin := flag.Bool("nospin", false, "ONNX Runtime threads sleep instead of spinning between runs")
	workers := flag.Int("workers", 0, "decode and encode goroutines each (0 = GOMAXPROCS)")
	useJPEG := flag.Bool("jpeg", false, "run on JPEG copies (quality 90) of the images")
	breakdown := flag.Bool("breakdown", false, "first time each stage alone, per image")
	modelPath := flag.String("model", "", "ONNX model (default: the shared person model)")
	imageDir := flag.String("images", "", "folder of images (default: the shared CamVid val)")
	device := flag.String("device", "cpu", "cpu, cuda or auto: where both sides run")
	asJSON := flag.Bool("json", false, "print one JSON object")
	hostArgmax := flag.Bool("host-argmax", false, "arg-max on the host over the scores (inference.Open), as segment did before the arg-max went into the graph")
	bareOnly := flag.Bool("bare-only", false, "run only the bare session, -n times on a zero batch of the model's fixed input size, and exit: "+
		"its peak memory (/usr/bin/time -v) against segment's on the same model")
	flag.Parse()
	if *modelPath == "" || *imageDir == "" {
		assets := testassets.SharedAssetsDir()
		if assets == "" {
			log.Fatal("needs the shared assets (models/deeplabv3plus_person_dynamic.onnx, data/camvid), or -model and -images")
		}
		if *modelPath == "" {
			*modelPath = filepath.Join(assets, "models", "deeplabv3plus_person_dynamic.onnx")
		}
		if *imageDir == "" {
			*imageDir = filepath.Join(assets, "data", "camvid", "images", "val")
		}
	}
	if err := runtime.InitFor("", *device); err != nil {
		log.Fatal(err)
	}
	if *bareOnly {
		if err := runBare(*modelPath, *n, *threads, *device); err != nil {
			log.Fatal(err)
		}
		return
	}
	seg, bareSess, err := openModel(*modelPath, batch, *threads, *device, *noSpin, !*hostArgmax)
	if err != nil {
		log.Fatal(err)
	}
	defer seg.Close()
	defer bareSess.Close()
	paths, err := imageio.ListImages(*imageDir)
	if err != nil {
		log.Fatal(err)
	}
	paths = paths[:min(*n, len(paths))]
	if *useJPEG {
		dir, err := os.MkdirTemp("", "segbench-jpeg")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if paths, err = jpegCopies(paths, dir, 90); err != nil {
			log.Fatal(err)
		}
	}
	if !*asJSON {
		fmt.Println(imageio.DecoderInfo())
	}
	if *breakdown {
		if err := stageBreakdown(seg, paths); err != nil {
			log.Fatal(err)
		}
	}
	if *runs < 1 {
		return // -runs 0: the breakdown alone
	}

	// Bare: tensors decoded and stacked beforehand, timed Run calls only.
	batches, shape, err := stackedBatches(paths, seg.Pre, *batch)
	if err != nil {
		log.Fatal(err)
	}
	per := int(3 * shape[2] * shape[3])
	bare := func() time.Duration {
		t0 := time.Now()
		for _, b := range batches {
			s := slices.Clone(shape)
			s[0] = int64(len(b) / per)
			if _, err := bareSess.Run(runtime.NewFloat32(s, b)); err != nil {
				log.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	// Bare with the scores written by ONNX Runtime into one buffer kept
	// from run to run (RunInto), as the pipeline now does: no copy back.
	var into []*runtime.Tensor
	bareInto := func() time.Duration {
		t0 := time.Now()
		for _, b := range batches {
			s := slices.Clone(shape)
			s[0] = int64(len(b) / per)
			if len(into) > 0 && into[0].Shape[0] != s[0] {
				into = nil // another batch size
			}
			outs, err := bareSess.RunInto(into, runtime.NewFloat32(s, b))
			if err != nil {
				log.Fatal(err)
			}
			into = outs
		}
		return time.Since(t0)
	}
	// The model alone as the pipeline runs it, on the same batches.
	inferOnly := func() time.Duration {
		t0 := time.Now()
		for _, b := range batches {
			outs, err := seg.Infer(b, len(b)/per, pipeline.Shape{3, int(shape[2]), int(shape[3])})
			if err != nil {
				log.Fatal(err)
			}
			for _, o := range outs { // as the pipeline does once an image is finished
				if o.Release != nil {
					o.Release()
				}
			}
		}
		return time.Since(t0)
	}
	out, err := os.MkdirTemp("", "segbench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(out)
	var inferTimes []time.Duration // the pipeline's time inside Infer
	full := func() time.Duration {
		finish := func(r inference.Result) error {
			return imageio.WriteMaskPNG(filepath.Join(out, filepath.Base(r.Path)), r.Labels, r.Width, r.Height, nil)
		}
		rep, err := pipeline.Run(paths, seg.Stages(imageio.Decoder{}, finish), pipeline.Config{Batch: *batch, PrepareWorkers: *workers, FinishWorkers: *workers, InFlight: seg.InFlight()})
		if err != nil || len(rep.Failures) > 0 {
			log.Fatal(err, rep.Failures)
		}
		inferTimes = append(inferTimes, rep.InferElapsed)
		return rep.Elapsed
	}
	bare() // warm-up: first runs allocate ORT's arena
	bareInto()
	inferOnly()
	var tb, tbi, tf, ti []time.Duration
	for r := 0; r < *runs; r++ { // interleaved so load drifts hit all alike
		tb = append(tb, bare())
		tbi = append(tbi, bareInto())
		ti = append(ti, inferOnly())
		tf = append(tf, full())
	}
	report(result{paths: len(paths), batch: *batch, device: seg.Session.Device, runs: *runs, model: *modelPath,
		jpeg: *useJPEG, threads: *threads, shape: shape, bare: median(tb), bareInto: median(tbi), full: median(tf), infer: median(inferTimes),
		inferOnly: median(ti), labelsInGraph: seg.LabelsInGraph()}, *asJSON)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// stackedBatches decodes and preprocesses the images into batches of
// batch images, one []float32 each, and returns the shape of one image's
// tensor as [0, 3, H, W].
func stackedBatches(paths []string, pre imageio.Preprocess, batch int) ([][]float32, []int64, error) {
	var batches [][]float32
	var shape []int64
	for i := 0; i < len(paths); i += batch {
		var b []float32
		for _, p := range paths[i:min(i+batch, len(paths))] {
			img, err := imageio.ReadImage(p)
			if err != nil {
				return nil, nil, err
			}
			t, g, err := pre.NewTensor(img)
			if err != nil {
				return nil, nil, err
			}
			b = append(b, t...)
			shape = []int64{0, 3, int64(g.Height), int64(g.Width)}
		}
		batches = append(batches, b)
	}
	return batches, shape, nil
}

// result is one comparison: medians of the bare loop, the whole pipeline,
// and the pipeline's time inside inference.
type result struct {
	paths, batch, runs, threads int
	device, model               string
	jpeg, labelsInGraph         bool
	shape                       []int64
	bare, full, infer           time.Duration
	bareInto                    time.Duration // bare, the outputs written into buffers kept from run to run
	inferOnly                   time.Duration // Segmenter.Infer alone on the prepared batches
}

func report(r result, asJSON bool) {
	mb, mf := r.bare, r.full
	if asJSON {
		json.NewEncoder(os.Stdout).Encode(map[string]any{
			"images": r.paths, "batch": r.batch, "device": r.device, "runs": r.runs,
			"bare_images_per_s": float64(r.paths) / mb.Seconds(), "segtune_images_per_s": float64(r.paths) / mf.Seconds(),
			"ratio": mb.Seconds() / mf.Seconds(), "model": r.model,
			// Where the pipeline's time goes: inside Infer (the model's
			// runs and their tensors' copies) against the whole.
			"bare_s": mb.Seconds(), "segtune_s": mf.Seconds(), "segtune_infer_s": r.infer.Seconds(),
			// The model alone as the pipeline runs it (arg-max in the
			// graph where labels_in_graph), on the bare loop's batches.
			"inference_s": r.inferOnly.Seconds(), "inference_images_per_s": float64(r.paths) / r.inferOnly.Seconds(),
			"labels_in_graph": r.labelsInGraph,
			// Bare with its outputs written into buffers kept from run
			// to run (RunInto), no copy back to Go.
			"bare_into_s": r.bareInto.Seconds(), "segtune_over_bare_into": mf.Seconds()/r.bareInto.Seconds() - 1,
		})
		return
	}
	format := "PNG"
	if r.jpeg {
		format = "JPEG q90"
	}
	fmt.Printf("images %d (%s), batch %d, %dx%d, runs %d, ONNX Runtime threads %d\n", r.paths, format, r.batch, r.shape[3], r.shape[2], r.runs, r.threads)
	fmt.Printf("bare ONNX Runtime   %8.2f s  %6.2f images/s  (the model's scores back to Go)\n", mb.Seconds(), float64(r.paths)/mb.Seconds())
	fmt.Printf("bare, into a buffer %8.2f s  %6.2f images/s  (RunInto: the scores written into one buffer kept from run to run)\n", r.bareInto.Seconds(), float64(r.paths)/r.bareInto.Seconds())
	where := "on the host"
	if r.labelsInGraph {
		where = "in the graph"
	}
	fmt.Printf("segtune inference   %8.2f s  %6.2f images/s  (Segmenter.Infer alone, arg-max %s)\n", r.inferOnly.Seconds(), float64(r.paths)/r.inferOnly.Seconds(), where)
	fmt.Printf("segtune pipeline    %8.2f s  %6.2f images/s\n", mf.Seconds(), float64(r.paths)/mf.Seconds())
	fmt.Printf("overhead            %+7.1f %%  (against bare into a buffer %+.1f %%)\n", 100*(mf.Seconds()/mb.Seconds()-1), 100*(mf.Seconds()/r.bareInto.Seconds()-1))
	fmt.Printf("  inside inference  %+7.1f %%  (the pipeline's time in Infer against bare: codecs competing for the cores)\n", 100*(r.infer.Seconds()/mb.Seconds()-1))
}

// openModel opens the model at path as segment does (with labelsOnly,
// inference.OpenLabels), fed as the person model wants (values in [-1,
// 1]), and a bare session on the model itself. A model with a fixed batch
// sets *batch: the bare loop stacks that many images into one Run.
func openModel(path string, batch *int, threads int, device string, noSpin, labelsOnly bool) (*inference.Segmenter, *runtime.Session, error) {
	m, err := onnx.Load(path)
	if err != nil {
		return nil, nil, err
	}
	ct, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		return nil, nil, err
	}
	if b := int(ct.Batch); b > 0 && *batch != b {
		fmt.Fprintf(os.Stderr, "segment bench: %s takes batches of %d: -batch %d\n", path, b, b)
		*batch = b
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, nil, err
	}
	opts := runtime.Options{Threads: threads, Device: device}
	if noSpin {
		opts.Tuning.Config = map[string]string{"session.intra_op.allow_spinning": "0"}
	}
	open := inference.Open
	if labelsOnly {
		open = inference.OpenLabels
	}
	seg, err := open(data, ct, imageio.Preprocess{ValueScale: 1 / 127.5, ValueOffset: -1}, opts)
	if err != nil {
		return nil, nil, err
	}
	bare, err := runtime.NewSession(data, opts)
	if err != nil {
		seg.Close()
		return nil, nil, err
	}
	return seg, bare, nil
}

// runBare runs the model alone in a bare session, n times on a zero batch
// of its fixed input size (-bare-only): ONNX Runtime's own peak memory.
func runBare(path string, n, threads int, device string) error {
	m, err := onnx.Load(path)
	if err != nil {
		return err
	}
	ct, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		return err
	}
	if ct.Height <= 0 || ct.Width <= 0 {
		return fmt.Errorf("%s has no fixed input size: -bare-only runs fixed-size models", path)
	}
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	sess, err := runtime.NewSession(data, runtime.Options{Threads: threads, Device: device})
	if err != nil {
		return err
	}
	defer sess.Close()
	shape := []int64{1, 3, ct.Height, ct.Width}
	t0 := time.Now()
	for range n {
		if _, err := sess.Run(runtime.NewFloat32(shape, make([]float32, 3*ct.Height*ct.Width))); err != nil {
			return err
		}
	}
	fmt.Printf("bare ONNX Runtime: %d runs of %v in %v\n", n, shape, time.Since(t0).Round(time.Millisecond))
	return nil
}
