package finetune

import (
	"fmt"

	"github.com/segtune/segtune/internal/memlimit"
)

// trainBytesPerPixel is a rough allowance, per input pixel of a training
// batch, for the training graph's activations, their gradients and the
// logits (DeepLabV3+-sized networks); the input itself is 12 bytes.
const trainBytesPerPixel = 12 + 384

// checkMemory refuses a batch and crop whose training step could not fit
// the memory limit, before the data is read or the graph is built.
func (c *Config) checkMemory() error {
	bytes := memlimit.Product(int64(c.Batch), int64(c.Height), int64(c.Width), trainBytesPerPixel)
	return memlimit.Check(fmt.Sprintf("a training step on batches of %d %dx%d crops", c.Batch, c.Height, c.Width),
		bytes, "lower --batch or --crop")
}
