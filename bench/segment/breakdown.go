package main

import (
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/atomicfile"
)

// jpegCopies writes each image of paths as a JPEG of the given quality into
// dir and returns the new paths.
func jpegCopies(paths []string, dir string, quality int) ([]string, error) {
	var out []string
	for _, p := range paths {
		img, err := imageio.ReadImage(p)
		if err != nil {
			return nil, err
		}
		q := filepath.Join(dir, strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))+".jpg")
		err = atomicfile.WriteFunc(q, 0o644, func(w io.Writer) error { return jpeg.Encode(w, img, &jpeg.Options{Quality: quality}) })
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// stageBreakdown runs the pipeline's stages one image at a time on this
// goroutine, locked to its thread, and prints the median CPU milliseconds
// of that thread in each (so that other jobs on the machine count little):
// read and decode, preprocess, restoration (bilinear logits + arg-max),
// mask encode and atomic write; inference is the wall time of Run (its
// work is on ONNX Runtime's threads). Garbage collection runs on other
// threads and is not counted.
func stageBreakdown(seg *inference.Segmenter, paths []string) error {
	out, err := os.MkdirTemp("", "segbench-breakdown")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	var decodeT, preT, inferT, restoreT, writeT []time.Duration
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	read := func(p string) (image.Image, error) {
		t0 := cpuNow()
		m, err := imageio.ReadImage(p)
		decodeT = append(decodeT, cpuNow()-t0)
		return m, err
	}
	var labels inference.Result
	st := seg.StagesFrom(read, func(r inference.Result) error { labels = r; return nil })
	for rep := 0; rep < 2; rep++ { // the first pass warms caches and ORT
		decodeT, preT, inferT, restoreT, writeT = nil, nil, nil, nil, nil
		for _, p := range paths {
			t0 := cpuNow()
			prep, err := st.Prepare(p)
			if err != nil {
				return err
			}
			preT = append(preT, cpuNow()-t0-decodeT[len(decodeT)-1])
			w0 := time.Now()
			outs, err := st.Infer(prep.Input, 1, prep.Shape)
			if err != nil {
				return err
			}
			inferT = append(inferT, time.Since(w0))
			// As the pipeline does: the input goes back for the next image.
			st.Recycle(prep.Input)
			prep.Input = nil
			t0 = cpuNow()
			if err := st.Finish(p, prep, outs[0]); err != nil {
				return err
			}
			restoreT = append(restoreT, cpuNow()-t0)
			t0 = cpuNow()
			if err := imageio.WriteMaskPNG(filepath.Join(out, filepath.Base(p)+".png"), labels.Labels, labels.Width, labels.Height, nil); err != nil {
				return err
			}
			writeT = append(writeT, cpuNow()-t0)
		}
	}
	ms := func(d []time.Duration) float64 { return float64(median(d).Microseconds()) / 1000 }
	d, pr, in, rs, wr := ms(decodeT), ms(preT), ms(inferT), ms(restoreT), ms(writeT)
	outside := d + pr + rs + wr
	fmt.Printf("per image, median thread CPU ms: decode %.2f, preprocess %.2f, restore+argmax %.2f, encode+write %.2f; outside inference %.2f\n",
		d, pr, rs, wr, outside)
	fmt.Printf("inference (wall, one image at a time): %.1f ms\n", in)
	return nil
}

// cpuNow is the CPU time of the calling thread.
func cpuNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}
