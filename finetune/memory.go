package finetune

import (
	"fmt"
	"math"
	goruntime "runtime"
	"strings"

	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/runtime"
)

// Host memory a training step takes, per input pixel of a batch, for
// DeepLabV3+-sized networks. On the CPU the training graph's activations,
// their gradients and ONNX Runtime's arena live in it: a person-model
// (DeepLabV3+, MobileNetV2) fine-tune with batches of 4 240x320 crops
// peaked at 2.19 GB resident (/usr/bin/time -v), about 1.6 GB of it
// above the fixed part and the decoded-image cache, some 5 KB a pixel.
// With Device cuda or auto the activations are taken to live on the GPU
// (whether auto finds one is not known before ONNX Runtime is loaded), and
// the host holds the batch, its masks and the logits.
const (
	cpuTrainBytesPerPixel  = 5 << 10
	hostTrainBytesPerPixel = 12 + 384
)

// trainFixedBytes is the part that does not grow with the batch: ONNX
// Runtime and its sessions (training and validation), the model, the
// optimiser's state and Go's runtime.
const trainFixedBytes = 256 << 20

// trainAddressSpaceFixed is the address space a fine-tune maps beyond
// the memory it uses and its threads' (memlimit.ThreadAddressSpace), which
// counts against an address-space limit (RLIMIT_AS) though it is never
// touched: the libraries, Go's and ONNX Runtime's reservations and the
// validation session. A person-model fine-tune (batches of one 320x320
// crop, 2 threads, CamVid's 960x720 validation images) peaked at 3.33 GB
// of address space (VmPeak) for 0.9 GB resident, batches of 2 at 3.61 GB.
const trainAddressSpaceFixed = 2304 << 20

// The advice a run over the memory limit, or the address-space limit,
// gives (memlimit.TooLargeError's Fix), naming the settings by {key}.
const (
	FixMemory       = "lower {batch} or {crop}, or raise {max_memory} if the machine has the memory"
	FixAddressSpace = "lower {batch}, {crop} or {threads}, or raise the limit"
)

// checkMemory refuses a batch and crop whose training step could not fit
// the memory limit or the address-space limit, before the data is read or
// the graph is built.
func (c *Config) checkMemory() error {
	perPixel := int64(cpuTrainBytesPerPixel)
	if d := strings.ToLower(c.Device); d == runtime.DeviceCUDA || d == runtime.DeviceAuto {
		perPixel = hostTrainBytesPerPixel
	}
	bytes := addSaturating(memlimit.Product(int64(c.Batch), int64(c.Height), int64(c.Width), perPixel), trainFixedBytes)
	what := fmt.Sprintf("fine-tuning with batches of %d %dx%d crops", c.Batch, c.Height, c.Width)
	if err := memlimit.Check(what, bytes, FixMemory); err != nil {
		return err
	}
	threads := c.Threads
	if threads < 1 {
		threads = goruntime.NumCPU() // ONNX Runtime's default: one per core
	}
	mapped := addSaturating(bytes, addSaturating(trainAddressSpaceFixed, memlimit.Product(int64(threads), memlimit.ThreadAddressSpace())))
	return memlimit.CheckAddressSpace(fmt.Sprintf("%s on %d threads", what, threads), mapped,
		FixAddressSpace)
}

// addSaturating adds non-negative byte counts, stopping at math.MaxInt64.
func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
