package main

import (
	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune/data"
)

// photometricFlags are finetune's colour and blur augmentations
// (data.Photometric, done with imaging); all off by default, so runs
// without them are unchanged seed for seed.
func photometricFlags() []cli.Flag {
	const cat = "Augmentation"
	return []cli.Flag{
		&cli.Float64Flag{Name: "brightness", Usage: "random brightness change of up to ±B (0..1, e.g. 0.2 for ±20 %)", Category: cat},
		&cli.Float64Flag{Name: "contrast", Usage: "random contrast change of up to ±C (0..1)", Category: cat},
		&cli.Float64Flag{Name: "saturation", Usage: "random saturation change of up to ±S (0..1)", Category: cat},
		&cli.Float64Flag{Name: "gamma", Usage: "random gamma in [1/(1+G), 1+G] (0..4)", Category: cat},
		&cli.Float64Flag{Name: "blur", Usage: "random Gaussian blur, σ uniform in [0, B] pixels (0..20)", Category: cat},
	}
}

// photometricConfig reads photometricFlags.
func photometricConfig(c *cli.Context) data.Photometric {
	return data.Photometric{
		Brightness: c.Float64("brightness"), Contrast: c.Float64("contrast"), Saturation: c.Float64("saturation"),
		Gamma: c.Float64("gamma"), Blur: c.Float64("blur"),
	}
}

// geometricFlags are finetune's rotation, shear, translation and cutout of
// the training crop (data.Geometric); all off by default, so runs without
// them are unchanged seed for seed.
func geometricFlags() []cli.Flag {
	const cat = "Augmentation"
	return []cli.Flag{
		&cli.Float64Flag{Name: "rotate", Usage: "random rotation of the crop by up to ±`DEG` degrees (0..180): image bilinear, mask nearest, uncovered pixels padded and ignored", Category: cat},
		&cli.Float64Flag{Name: "shear", Usage: "random horizontal shear of the crop by up to ±`DEG` degrees (0..45), as --rotate", Category: cat},
		&cli.Float64Flag{Name: "translate", Usage: "random shift of the crop by up to ±`F` of its width and height (0..0.5), as --rotate", Category: cat},
		&cli.IntFlag{Name: "cutout", Usage: "blank `N` random rectangles of each crop (sides 1/8 to 1/4 of the crop's; 0..16), padded in the image and ignored in the mask", Category: cat},
	}
}

// geometricConfig reads geometricFlags.
func geometricConfig(c *cli.Context) data.Geometric {
	return data.Geometric{Rotate: c.Float64("rotate"), Shear: c.Float64("shear"), Translate: c.Float64("translate"), Cutout: c.Int("cutout")}
}
