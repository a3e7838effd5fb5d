package grad

// SetIm2colWeightGrad switches the dense-conv weight-gradient form for tests
// and returns the previous setting.
func SetIm2colWeightGrad(on bool) bool {
	old := im2colWeightGrad
	im2colWeightGrad = on
	return old
}
