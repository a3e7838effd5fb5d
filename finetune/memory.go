package finetune

import (
	"fmt"
	"math"
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
// With --device cuda or auto the activations are taken to live on the GPU
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

// checkMemory refuses a batch and crop whose training step could not fit
// the memory limit, before the data is read or the graph is built.
func (c *Config) checkMemory() error {
	perPixel := int64(cpuTrainBytesPerPixel)
	if d := strings.ToLower(c.Device); d == runtime.DeviceCUDA || d == runtime.DeviceAuto {
		perPixel = hostTrainBytesPerPixel
	}
	bytes := memlimit.Product(int64(c.Batch), int64(c.Height), int64(c.Width), perPixel)
	if bytes < math.MaxInt64-trainFixedBytes {
		bytes += trainFixedBytes
	}
	return memlimit.Check(fmt.Sprintf("fine-tuning with batches of %d %dx%d crops", c.Batch, c.Height, c.Width),
		bytes, "lower --batch or --crop, or raise --max-memory if the machine has the memory")
}
