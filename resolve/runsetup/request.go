// Package runsetup turns a fine-tuning run's settings as a user gives
// them (bound values, text to parse, bucket folders, an earlier run's
// config.json) into a checked finetune.Config, in the order a user meets
// the checks: the recorded run's inputs, how the run executes, its
// settings, its base model, its data, its folder. It stands above
// finetune and resolve (the base model's settings, bucket mirrors) and
// names a setting by its key: a refused value is a *setting.Error or a
// message naming keys, marked setting.Usage where it is the user's
// mistake found before any work.
package runsetup

import (
	"io"
	"slices"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/regsettings"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/resolve"
)

// Request is a fine-tuning run as its user asks for it.
type Request struct {
	// Config holds the settings given as they are, over
	// finetune.DefaultConfig (Device and Threads included); Config sets
	// the others from the fields below.
	Config      finetune.Config
	Regularizer regsettings.Settings
	// Model is the base model, "" only with Resume (the checkpoint has it);
	// Classes > 0 gives it a fresh classifier of as many classes.
	Model   string
	Classes int
	// Crop is the training crop HxW; CUDAOptions are "K=V,K=V".
	Crop, CUDAOptions string
	NoFlip            bool
	// Momentum and WeightDecay are taken where Given names them (else the
	// optimizer's own).
	Momentum, WeightDecay float64
	ValDense              inference.DenseRequest // validation's tiles and TTA
	Data                  Data
	Layout                datalayout.Layout // how to read Data.Root
	// ValSplit holds part of the training data out for validation where
	// val_split is set (Given, or the recorded run's).
	ValSplit    datalayout.ValSplit
	MaskPalette string // a palette file for colour masks
	ClassNames  []string
	// Preprocessing is the user's layer over the base model's settings.
	Preprocessing resolve.Preprocessing
	// Given are the keys of the settings the user gave
	// (finetune.RunSettings): a resumed run refuses changed ones, a
	// repeated one takes them over its recorded ones.
	Given []string
	// Recorded is an earlier run's configuration to repeat, read from
	// RecordedPath; nil for none.
	Recorded     *finetune.Config
	RecordedPath string
	Resume       bool   // continue the run in Out
	Out          string // the run's folder
	// Notes receive what set-up found and chose (nil: nowhere), Warnings
	// what a user should see even so; Name calls a setting as the user
	// does (nil: by its key).
	Notes, Warnings io.Writer
	Name            func(key string) string
}

// Data are a run's data folders, paths or bucket URLs (mirrored into the
// cache): a data folder in any layout, and folders of images and masks
// over it or instead of it.
type Data struct {
	Root string
	finetune.Folders
}

// urls reports whether any of the folders is in object storage.
func (d Data) urls() bool {
	return slices.ContainsFunc([]string{d.Root, d.TrainImages, d.TrainMasks, d.ValImages, d.ValMasks}, storage.IsURL)
}
