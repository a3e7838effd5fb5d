package main

import (
	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune/data"
)

// photometricFlags set finetune's colour and blur augmentations
// (data.Photometric, done with imaging); all off by default, so runs
// without them are unchanged seed for seed.
func photometricFlags(p *data.Photometric) []cli.Flag {
	const cat = "Augmentation"
	return []cli.Flag{
		&cli.Float64Flag{Name: "brightness", Usage: "random brightness change of up to ±B (0..1, e.g. 0.2 for ±20 %)", Category: cat, Destination: &p.Brightness},
		&cli.Float64Flag{Name: "contrast", Usage: "random contrast change of up to ±C (0..1)", Category: cat, Destination: &p.Contrast},
		&cli.Float64Flag{Name: "saturation", Usage: "random saturation change of up to ±S (0..1)", Category: cat, Destination: &p.Saturation},
		&cli.Float64Flag{Name: "gamma", Usage: "random gamma in [1/(1+G), 1+G] (0..4)", Category: cat, Destination: &p.Gamma},
		&cli.Float64Flag{Name: "blur", Usage: "random Gaussian blur, σ uniform in [0, B] pixels (0..20)", Category: cat, Destination: &p.Blur},
	}
}

// geometricFlags set finetune's rotation, shear, translation and cutout
// of the training crop (data.Geometric); all off by default, so runs
// without them are unchanged seed for seed.
func geometricFlags(g *data.Geometric) []cli.Flag {
	const cat = "Augmentation"
	return []cli.Flag{
		&cli.Float64Flag{Name: "rotate", Usage: "random rotation of the crop by up to ±`DEG` degrees (0..180): image bilinear, mask nearest, uncovered pixels padded and ignored", Category: cat, Destination: &g.Rotate},
		&cli.Float64Flag{Name: "shear", Usage: "random horizontal shear of the crop by up to ±`DEG` degrees (0..45), as --rotate", Category: cat, Destination: &g.Shear},
		&cli.Float64Flag{Name: "translate", Usage: "random shift of the crop by up to ±`F` of its width and height (0..0.5), as --rotate", Category: cat, Destination: &g.Translate},
		&cli.IntFlag{Name: "cutout", Usage: "blank `N` random rectangles of each crop (sides 1/8 to 1/4 of the crop's; 0..16), padded in the image and ignored in the mask", Category: cat, Destination: &g.Cutout},
	}
}
