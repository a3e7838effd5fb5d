// Command precision measures what the export precisions buy at inference:
// images/s of the float32, int8 (calibrated QDQ) and float16 exports of a
// model in bare ONNX Runtime sessions, on the same prepared tensors.
// The runs of the three models are interleaved (fp32, int8, fp16, fp32, …)
// so that a machine shared with other work slows them alike; the median
// over -runs is reported, and the median of each run's int8/fp32 and
// fp16/fp32 ratios.
//
//	go run ./bench/precision -n 8 -runs 5 -threads 2
//
// By default it uses the shared person model on CamVid at the size it
// scores best at (2× upscaled, 721×961): -model, -images and -scale change
// that; -device cuda times the CUDA provider where one is installed.
package main

import (
	"flag"
	"fmt"
	"log"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/segtune/segtune/deploy"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/runtime"
)

func main() {
	model := flag.String("model", "", "float32 ONNX model (default: the shared person model)")
	images := flag.String("images", "", "images to time on (default: CamVid val)")
	calib := flag.String("calibrate", "", "images to calibrate int8 on (default: CamVid train)")
	n := flag.Int("n", 8, "images timed per run")
	calN := flag.Int("calibrate-count", 8, "calibration images")
	runs := flag.Int("runs", 5, "interleaved repetitions (median reported)")
	threads := flag.Int("threads", 0, "ONNX Runtime threads (0 = all cores)")
	scale := flag.Float64("scale", 2, "upscale images by this factor (DeepLab's 8k+1 sizes)")
	device := flag.String("device", "cpu", "cpu or cuda")
	flag.Parse()
	assets := testassets.SharedAssetsDir()
	if *model == "" || *images == "" || *calib == "" {
		if assets == "" {
			log.Fatal("give -model, -images and -calibrate, or make the shared assets reachable ($SEGTUNE_SHARED_ASSETS)")
		}
		def := func(p *string, elem ...string) {
			if *p == "" {
				*p = filepath.Join(append([]string{assets}, elem...)...)
			}
		}
		def(model, "models", "deeplabv3plus_person_dynamic.onnx")
		def(images, "data", "camvid", "images", "val")
		def(calib, "data", "camvid", "images", "train")
	}
	if err := runtime.InitFor("", *device); err != nil {
		log.Fatal(err)
	}
	m, err := onnx.Load(*model)
	if err != nil {
		log.Fatal(err)
	}
	ct, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		log.Fatal(err)
	}
	pre := imageio.Preprocess{Resize: imageio.ResizeScale, ScaleFactor: *scale, MultipleOf: 8, PlusOne: true,
		ValueScale: 1 / 127.5, ValueOffset: -1}
	opts := runtime.Options{Threads: *threads, Device: *device}
	data, _ := m.Marshal()
	ref, err := inference.Open(data, ct, pre, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer ref.Close()
	list := func(dir string, k int) []string {
		paths, err := imageio.ListImages(dir)
		if err != nil || len(paths) == 0 {
			log.Fatalf("%s: no images (%v)", dir, err)
		}
		return deploy.Sample(paths, k)
	}
	calImages, timed := list(*calib, *calN), list(*images, *n)

	models, err := exports(m, ref, data, calImages, opts)
	if err != nil {
		log.Fatal(err)
	}

	// Prepared input tensors, one image per run call (batch 1).
	inputs, h, w, err := preparedInputs(ref, timed)
	if err != nil {
		log.Fatal(err)
	}
	order := []deploy.Precision{deploy.FP32, deploy.INT8, deploy.FP16}
	sessions := map[deploy.Precision]*runtime.Session{}
	for _, p := range order {
		s, err := runtime.NewSession(models[p], opts)
		if err != nil {
			log.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Run(inputs[0]); err != nil { // warm-up
			log.Fatal(err)
		}
		sessions[p] = s
	}
	rates := map[deploy.Precision][]float64{}
	for r := 0; r < *runs; r++ {
		for _, p := range order {
			start := time.Now()
			for _, in := range inputs {
				if _, err := sessions[p].Run(in); err != nil {
					log.Fatal(err)
				}
			}
			rates[p] = append(rates[p], float64(len(inputs))/time.Since(start).Seconds())
		}
	}
	median := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	v, _ := runtime.Version()
	fmt.Printf("%s, %d images of %dx%d, batch 1, %d threads, %s, ONNX Runtime %s, median of %d runs\n",
		filepath.Base(*model), len(inputs), h, w, *threads, sessions[deploy.FP32].Device, v, *runs)
	// Each run's ratio pairs models timed back to back; their median is
	// steadier than the ratio of medians on a busy machine.
	for _, p := range order {
		var ratios []float64
		for r := range rates[p] {
			ratios = append(ratios, rates[p][r]/rates[deploy.FP32][r])
		}
		fmt.Printf("  %-5s %7.2f images/s  %.2f× fp32 (median of per-run ratios)  runs %v\n", p, median(rates[p]), median(ratios), round(rates[p]))
	}
}

func round(xs []float64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.2f", x)
	}
	return out
}

// exports converts m to int8 (min-max calibrated on calImages) and fp16,
// and returns every precision's serialised model, fp32's being data.
func exports(m *onnx.Model, ref *inference.Segmenter, data []byte, calImages []string, opts runtime.Options) (map[deploy.Precision][]byte, error) {
	models := map[deploy.Precision][]byte{deploy.FP32: data}
	for _, p := range []deploy.Precision{deploy.INT8, deploy.FP16} {
		start := time.Now()
		conv, err := deploy.Convert(m, ref, deploy.Options{Precision: p, CalibImages: calImages,
			Calib: quantize.CalibOptions{Method: quantize.MinMax}, Session: opts})
		if err != nil {
			return nil, err
		}
		if models[p], err = conv.Model.Marshal(); err != nil {
			return nil, err
		}
		fmt.Printf("%s export: %.1f MiB in %.1fs\n", p, float64(len(models[p]))/(1<<20), time.Since(start).Seconds())
	}
	return models, nil
}

// preparedInputs decodes and preprocesses the images as ref does, one
// batch-1 tensor each, and returns the size they came to.
func preparedInputs(ref *inference.Segmenter, paths []string) ([]*runtime.Tensor, int, int, error) {
	layout := contract.Layout(strings.ToUpper(string(ref.Pre.Layout)))
	var inputs []*runtime.Tensor
	var h, w int
	for _, p := range paths {
		img, err := imageio.Decoder{}.ReadFile(p)
		if err != nil {
			return nil, 0, 0, err
		}
		x, g, err := ref.Pre.NewTensor(img)
		if err != nil {
			return nil, 0, 0, err
		}
		h, w = g.Height, g.Width
		inputs = append(inputs, runtime.NewFloat32(layout.Shape(1, g.Height, g.Width), x))
	}
	return inputs, h, w, nil
}
