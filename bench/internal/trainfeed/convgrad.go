package trainfeed

import (
	"strings"

	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/runtime"
)

// ConvGradKernels sets the session options that register the ConvGrad
// operator's kernels for a training graph compiled with grad.Config.ConvGrad
// classes: the cuDNN kernel where the session may run on CUDA (a CUDA
// session that falls back to the CPU gets the CPU kernel), the CPU kernel
// on the CPU. No classes, no kernels. The benchmarks' one place for it.
func ConvGradKernels(o *runtime.Options, classes grad.ConvClasses) {
	if classes == 0 {
		return
	}
	onCPU := o.Device == "" || strings.EqualFold(o.Device, runtime.DeviceCPU)
	o.ConvGradCUDA, o.ConvGradCPU = !onCPU, onCPU
}
