package grad

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
