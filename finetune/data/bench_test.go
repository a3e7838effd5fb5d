package data

import (
	"context"
	"math/rand/v2"
	"testing"
)

// randomSample is a 480×360 CamVid-sized sample of noise.
func randomSample() Sample {
	const w, h = 480, 360
	r := rand.New(rand.NewPCG(1, 2))
	s := Sample{Width: w, Height: h, RGB: make([]uint8, 3*w*h), Labels: make([]uint8, w*h)}
	for i := range s.RGB {
		s.RGB[i] = uint8(r.Uint32())
	}
	for i := range s.Labels {
		s.Labels[i] = uint8(r.IntN(12))
	}
	return s
}

// BenchmarkAugment measures one training example: random scale 0.5–2,
// 360×480 crop, flip and normalisation of a 480×360 image and its mask.
func BenchmarkAugment(b *testing.B) {
	p, err := newPipeline(&Augment{Height: 360, Width: 480, ScaleMin: 0.5, ScaleMax: 2, Flip: true}, personNorm, 255)
	if err != nil {
		b.Fatal(err)
	}
	s := randomSample()
	img, mask := make([]float32, 3*360*480), make([]int64, 360*480)
	var sc slotScratch
	for i := 0; b.Loop(); i++ {
		if _, err := p.apply(s, newRNG(1, streamExample, 0, i), img, mask, &sc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoaderCamVid measures batches of 8 from the cached CamVid
// train split with all workers.
func BenchmarkLoaderCamVid(b *testing.B) {
	ds := openCamVid(b)
	l, err := NewLoader(context.Background(), ds, LoaderConfig{
		BatchSize:  8,
		Preprocess: personNorm,
		Augment:    &Augment{Height: 360, Width: 480, ScaleMin: 0.5, ScaleMax: 2, Flip: true},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for b.Loop() {
		bt, err := l.Next(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		l.Recycle(bt)
	}
}
