package grad

import (
	"fmt"
	"math"
)

func init() {
	register("Resize", opSpec{rule: resizeRule, nature: linear, upgrade: opsetUpgrade{11, upgradeToResize}})
	// No rule: rewritten into Resize.
	register("Upsample", opSpec{upgrade: opsetUpgrade{13, upgradeToResize}})
}

// resizeRule: nearest and linear Resize act separably on each resized axis
// as a constant matrix A [out, in], so dx = A_hᵀ · dy · A_w — two MatMuls
// (broadcast over the leading axes). Only the last two axes may change size.
func resizeRule(c *gradCtx) ([]string, error) {
	xs, ys := c.shape(c.in(0)), c.shape(c.out(0))
	rank := len(xs)
	if rank == 0 || len(ys) != rank {
		return nil, fmt.Errorf("shapes X %v, Y %v", xs, ys)
	}
	mode := attrString(c.n, "mode", "nearest")
	if mode != "nearest" && mode != "linear" {
		return nil, unsupportedf("mode %q has no gradient rule (nearest and linear do)", mode)
	}
	if attrInt(c.n, "antialias", 0) != 0 && mode == "linear" {
		return nil, unsupportedf("antialias=1 is not supported")
	}
	ctm := attrString(c.n, "coordinate_transformation_mode", "half_pixel")
	nearest := attrString(c.n, "nearest_mode", "round_prefer_floor")
	// Scales as ONNX Runtime uses them: the given scales, else out/in.
	scales := make([]float32, rank)
	for i := range scales {
		scales[i] = float32(ys[i]) / float32(xs[i])
	}
	if sv, ok, err := c.constFloats(2); err != nil {
		return nil, err
	} else if ok && len(sv) > 0 {
		axes := attrInts(c.n, "axes")
		if axes == nil {
			if len(sv) != rank {
				return nil, fmt.Errorf("%d scales for rank %d", len(sv), rank)
			}
			for i := range sv {
				scales[i] = float32(sv[i])
			}
		} else {
			for j, a := range axes {
				a, err := normAxis(a, rank)
				if err != nil || j >= len(sv) {
					return nil, fmt.Errorf("axes %v do not match scales", axes)
				}
				scales[a] = float32(sv[j])
			}
		}
	}
	if ctm == "tf_crop_and_resize" {
		return nil, unsupportedf("coordinate_transformation_mode tf_crop_and_resize is not supported")
	}
	for i := 0; i < rank-2; i++ {
		if xs[i] != ys[i] {
			return nil, unsupportedf("only the last two axes may be resized (axis %d: %d → %d)", i, xs[i], ys[i])
		}
	}
	g := c.dY[0]
	for a := max(rank-2, 0); a < rank; a++ {
		if xs[a] == ys[a] && scales[a] == 1 {
			continue
		}
		m, err := resizeMatrix(int(xs[a]), int(ys[a]), scales[a], mode, ctm, nearest)
		if err != nil {
			return nil, err
		}
		if a == rank-1 {
			// dy [..., W'] · A [W', W]
			g = c.op1("MatMul", []string{g, c.constFloat(m, []int64{ys[a], xs[a]})})
		} else {
			// Aᵀ [H, H'] · dy [..., H', W]
			g = c.op1("MatMul", []string{c.constFloat(transposeMat(m, int(ys[a]), int(xs[a])), []int64{xs[a], ys[a]}), g})
		}
	}
	dx := c.grads()
	dx[0] = g
	return dx, nil
}

func transposeMat(m []float64, rows, cols int) []float64 {
	t := make([]float64, len(m))
	for r := 0; r < rows; r++ {
		for k := 0; k < cols; k++ {
			t[k*rows+r] = m[r*cols+k]
		}
	}
	return t
}

// originalCoord maps an output coordinate to the input, in float32 as ONNX
// Runtime computes it (nearest-neighbour ties depend on it).
func originalCoord(x int, scale float32, outLen, inLen int, ctm string) (float32, error) {
	xf := float32(x)
	switch ctm {
	case "half_pixel":
		return (xf+0.5)/scale - 0.5, nil
	case "pytorch_half_pixel":
		if outLen > 1 {
			return (xf+0.5)/scale - 0.5, nil
		}
		return 0, nil
	case "align_corners":
		if outLen == 1 {
			return 0, nil
		}
		return xf * float32(inLen-1) / float32(outLen-1), nil
	case "asymmetric":
		return xf / scale, nil
	case "tf_half_pixel_for_nn":
		return (xf + 0.5) / scale, nil
	case "half_pixel_symmetric":
		adj := float32(outLen) / (scale * float32(inLen))
		center := float32(inLen) / 2
		offset := center * (1 - adj)
		return offset + (xf+0.5)/scale - 0.5, nil
	}
	return 0, unsupportedf("coordinate_transformation_mode %q is not supported", ctm)
}

// resizeMatrix returns the row-major [out, in] interpolation matrix.
func resizeMatrix(inLen, outLen int, scale float32, mode, ctm, nearestMode string) ([]float64, error) {
	m := make([]float64, outLen*inLen)
	for o := 0; o < outLen; o++ {
		x, err := originalCoord(o, scale, outLen, inLen, ctm)
		if err != nil {
			return nil, err
		}
		if mode == "nearest" {
			var i int
			switch nearestMode {
			case "round_prefer_floor":
				if x == float32(math.Floor(float64(x)))+0.5 {
					i = int(math.Floor(float64(x)))
				} else {
					i = int(math.Round(float64(x)))
				}
			case "round_prefer_ceil":
				i = int(math.Round(float64(x))) // Go rounds halves away from zero
				if x < 0 && x == float32(math.Floor(float64(x)))+0.5 {
					i = int(math.Ceil(float64(x)))
				}
			case "floor":
				i = int(math.Floor(float64(x)))
			case "ceil":
				i = int(math.Ceil(float64(x)))
			default:
				return nil, unsupportedf("nearest_mode %q is not supported", nearestMode)
			}
			i = min(max(i, 0), inLen-1)
			m[o*inLen+i] = 1
			continue
		}
		x = max(0, min(x, float32(inLen-1)))
		x1 := min(int(x), inLen-1)
		x2 := min(x1+1, inLen-1)
		d1 := float32(math.Abs(float64(x - float32(x1))))
		d2 := float32(math.Abs(float64(x - float32(x2))))
		if x1 == x2 {
			d1, d2 = 0.5, 0.5
		}
		m[o*inLen+x1] += float64(d2)
		m[o*inLen+x2] += float64(d1)
	}
	return m, nil
}
