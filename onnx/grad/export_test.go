package grad

// TargetOpset is the opset the compiler's graphs declare at least.
const TargetOpset = targetOpset

// SetIm2colWeightGrad switches the dense-conv weight-gradient form for tests
// and returns the previous setting.
func SetIm2colWeightGrad(on bool) bool {
	old := im2colWeightGrad
	im2colWeightGrad = on
	return old
}

// SetFlipByMatMul switches the kernel-flip form of stride-1 input gradients
// for tests and returns the previous setting.
func SetFlipByMatMul(on bool) bool {
	old := flipByMatMul
	flipByMatMul = on
	return old
}

// Nature and its values let the external tests read operator natures.
type Nature = nature

const (
	Smooth          = smooth
	Linear          = linear
	Multilinear     = multilinear
	PiecewiseLinear = piecewiseLinear
	Piecewise       = piecewise
	Stepwise        = stepwise
	ShapeOnly       = shapeOnly
)

// OpFacts is one registry entry as the external tests see it.
type OpFacts struct {
	Rule         bool
	Nature       Nature
	IndexOutputs []int
	// UpgradeSince is the first opset whose nodes are not rewritten; 0 when
	// none are.
	UpgradeSince int64
}

// Registry returns the operator registry.
func Registry() map[string]OpFacts {
	out := map[string]OpFacts{}
	for op, s := range registry {
		out[op] = OpFacts{Rule: s.rule != nil, Nature: s.nature, IndexOutputs: s.indexOutputs, UpgradeSince: s.upgrade.since}
	}
	return out
}

// Fold modes of Conv weight gradients (SetFoldWeightGrad).
const (
	FoldAuto   = int(foldAuto)
	FoldAlways = int(foldAlways)
	FoldNever  = int(foldNever)
)

// SetFoldWeightGrad sets how Conv weight gradients sum over the batch (one of
// FoldAuto, FoldAlways, FoldNever) for tests and returns the previous mode.
func SetFoldWeightGrad(mode int) int {
	old := foldWeightGrad
	foldWeightGrad = foldMode(mode)
	return int(old)
}

// SetSplitWeightGrad forces (on) or forbids (off) the split-patches form of
// dense stride-1 Conv weight gradients for tests; the previous mode is
// restored by calling the returned function.
func SetSplitWeightGrad(on bool) (restore func()) {
	old := splitWeightGrad
	splitWeightGrad = splitNever
	if on {
		splitWeightGrad = splitAlways
	}
	return func() { splitWeightGrad = old }
}

// SetWinograd forces (on) or forbids (off) the Winograd form of eligible
// 3×3 Convs for tests; call the returned function to restore the mode.
func SetWinograd(on bool) (restore func()) {
	old := winogradMode
	winogradMode = winoNever
	if on {
		winogradMode = winoAlways
	}
	return func() { winogradMode = old }
}
