package main

import (
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune/data"
)

func TestPhotometricFlags(t *testing.T) {
	var got data.Photometric
	var bound data.Photometric
	app := &cli.App{Flags: photometricFlags(&bound), Action: func(c *cli.Context) error {
		got = bound
		return nil
	}}
	if err := app.Run([]string{"segtune", "--brightness", "0.2", "--contrast", "0.1", "--saturation", "0.3", "--gamma", "0.5", "--blur", "1.5"}); err != nil {
		t.Fatal(err)
	}
	if want := (data.Photometric{Brightness: 0.2, Contrast: 0.1, Saturation: 0.3, Gamma: 0.5, Blur: 1.5}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if err := app.Run([]string{"segtune"}); err != nil {
		t.Fatal(err)
	}
	if got.Enabled() {
		t.Errorf("defaults %+v: want everything off", got)
	}
}

func TestGeometricFlags(t *testing.T) {
	var got data.Geometric
	var bound data.Geometric
	app := &cli.App{Flags: geometricFlags(&bound), Action: func(c *cli.Context) error {
		got = bound
		return nil
	}}
	if err := app.Run([]string{"segtune", "--rotate", "15", "--shear", "5", "--translate", "0.1", "--cutout", "2"}); err != nil {
		t.Fatal(err)
	}
	if want := (data.Geometric{Rotate: 15, Shear: 5, Translate: 0.1, Cutout: 2}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if err := app.Run([]string{"segtune"}); err != nil {
		t.Fatal(err)
	}
	if got.Enabled() {
		t.Errorf("defaults %+v: want everything off", got)
	}
}
