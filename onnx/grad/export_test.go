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
