package data

import (
	"fmt"

	"github.com/segtune/segtune/imageio"
)

// Batch is one step's worth of examples, ready for the training graph.
type Batch struct {
	// Epoch and Step locate the batch: Step counts from 0 within Epoch.
	Epoch, Step int
	// IDs are the examples in the batch, in slot order.
	IDs []int
	// Global, for a loader split into parts (LoaderConfig.Parts), holds
	// the whole batch's examples, this part's among them; nil otherwise.
	Global []int
	// Height and Width are the tensor size of every slot.
	Height, Width int
	// Images is [B,3,H,W] float32 in the Preprocess layout (NCHW unless it
	// says NHWC), normalised as the Preprocess says.
	Images []float32
	// Masks is [B,H,W]: class labels, with the ignore label kept as its
	// value (also in padding).
	Masks []int64
	// Geometries says, in evaluation, how each slot maps onto its original
	// image (for restoring predictions); nil in training.
	Geometries []imageio.Geometry
}

// GlobalIDs returns the examples of the whole batch: Global for a part,
// else IDs.
func (b *Batch) GlobalIDs() []int {
	if b.Global != nil {
		return b.Global
	}
	return b.IDs
}

// Size returns the number of examples in the batch.
func (b *Batch) Size() int { return len(b.IDs) }

// LastBatch says what happens to the last, partial batch of an epoch.
type LastBatch int

// Last-batch policies.
const (
	// LastDefault drops the partial batch in training (the training graph
	// has a fixed batch size) and keeps it in evaluation.
	LastDefault LastBatch = iota
	// LastDrop drops it.
	LastDrop
	// LastKeep yields it, smaller than BatchSize.
	LastKeep
)

// slots reshapes b (reused when large enough) for n slots of h×w.
func (b *Batch) slots(n, h, w int, eval bool) {
	b.IDs = grow(b.IDs, n)
	b.Height, b.Width = h, w
	b.Images = grow(b.Images, n*imageio.Channels*h*w)
	b.Masks = grow(b.Masks, n*h*w)
	b.Geometries = nil
	if eval {
		b.Geometries = make([]imageio.Geometry, n)
	}
}

// slot returns slot k's image and mask buffers.
func (b *Batch) slot(k int) ([]float32, []int64) {
	hw := b.Height * b.Width
	n := imageio.Channels * hw
	return b.Images[k*n : (k+1)*n : (k+1)*n], b.Masks[k*hw : (k+1)*hw : (k+1)*hw]
}

// batchSize checks that every example of ids gets the same tensor size
// and returns it; evaluation at native size needs equally sized images.
func batchSize(ds *Dataset, p *pipeline, ids []int) (h, w int, err error) {
	first := ""
	for _, id := range ids {
		e, ok := ds.Example(id)
		if !ok {
			return 0, 0, fmt.Errorf("loader: example id %d out of range 0..%d", id, ds.Len()-1)
		}
		eh, ew, err := p.size(e.Width, e.Height)
		if err != nil {
			return 0, 0, fmt.Errorf("loader: %s: %w", e.Image, err)
		}
		if first == "" {
			h, w, first = eh, ew, e.Image
			continue
		}
		if eh != h || ew != w {
			return 0, 0, fmt.Errorf("loader: %s gives a %dx%d (HxW) tensor but %s in the same batch gives %dx%d; use a fixed resize or batch size 1",
				e.Image, eh, ew, first, h, w)
		}
	}
	return h, w, nil
}
