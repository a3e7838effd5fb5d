// Package models builds ONNX networks that segtune can train from scratch
// and lists the pretrained models it knows about.
//
// The builders write plain ONNX graphs in Go (opset 17, default domain
// only) made of operators the gradient compiler (onnx/grad) differentiates,
// with every input size dynamic, so that a built model runs in ONNX
// Runtime as is and compiles into a training graph with grad.Build:
//
//   - DeepLabV3Plus: a small DeepLabV3+ with a MobileNetV2-style backbone,
//     ASPP and decoder, for semantic segmentation ([N,3,H,W] → [N,K,H,W]);
//   - LinearClassifier: the one-layer network of the paper's S-MNIST
//     experiment, optionally with extra output units (the S-measure node).
//
// Known and Lookup describe pretrained models as data: file, input size,
// preprocessing and classes.
//
// Package models/synth generates a synthetic segmentation data set whose
// objects' sizes span more than two orders of magnitude, to train and test
// on without downloads.
package models

import (
	"cmp"
	"slices"
)

// Metadata keys written into built models' metadata_props.
const (
	// MetaArchitecture names the builder: "deeplabv3plus" or "linear".
	MetaArchitecture = "segtune.architecture"
	// MetaConfig holds the builder's configuration as JSON, defaults filled.
	MetaConfig = "segtune.config"
)

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
