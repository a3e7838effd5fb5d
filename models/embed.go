package models

import _ "embed"

// SynthModel is the ONNX file of segtune-synth (see Known), compiled into
// the binary so that `segtune demo` needs nothing but segtune itself.
// scripts/pretrain-default.sh reproduces it.
//
//go:embed segtune-synth.onnx
var SynthModel []byte
