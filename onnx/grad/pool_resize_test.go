package grad_test

import (
	"fmt"

	"github.com/segtune/segtune/onnx"
)

func poolCases() []opCase {
	pool := func(op string, xs []int64, attrs ...*onnx.AttributeProto) func(m *opModel) {
		return func(m *opModel) { m.node(op, []string{m.rand("x", xs...)}, []string{"y"}, attrs...) }
	}
	x := []int64{2, 3, 7, 6}
	return []opCase{
		{"GlobalAveragePool", 0, pool("GlobalAveragePool", x)},
		{"AveragePool/k2s2", 0, pool("AveragePool", x, ais("kernel_shape", 2, 2), ais("strides", 2, 2))},
		{"AveragePool/k3s1pad_exclude", 0, pool("AveragePool", x, ais("kernel_shape", 3, 3), ais("pads", 1, 1, 1, 1))},
		{"AveragePool/k3s2pad_include", 0, pool("AveragePool", x, ais("kernel_shape", 3, 3), ais("strides", 2, 2), ais("pads", 1, 0, 1, 1), ai("count_include_pad", 1))},
		{"AveragePool/ceil", 0, pool("AveragePool", x, ais("kernel_shape", 3, 3), ais("strides", 2, 2), ai("ceil_mode", 1))},
		{"AveragePool/same_upper", 0, pool("AveragePool", x, ais("kernel_shape", 3, 2), ais("strides", 2, 2), as("auto_pad", "SAME_UPPER"))},
		{"AveragePool/whole", 0, pool("AveragePool", x, ais("kernel_shape", 7, 6))},
		{"MaxPool/k2s2", 0, pool("MaxPool", x, ais("kernel_shape", 2, 2), ais("strides", 2, 2))},
		{"MaxPool/k3s1_overlap", 0, pool("MaxPool", x, ais("kernel_shape", 3, 3), ais("pads", 1, 1, 1, 1))},
		{"MaxPool/k3s2_ceil", 0, pool("MaxPool", x, ais("kernel_shape", 3, 3), ais("strides", 2, 2), ai("ceil_mode", 1))},
		{"MaxPool/dilation", 0, pool("MaxPool", x, ais("kernel_shape", 2, 2), ais("dilations", 2, 2))},
		{"MaxPool/same_upper", 0, pool("MaxPool", x, ais("kernel_shape", 3, 3), ais("strides", 2, 2), as("auto_pad", "SAME_UPPER"))},
	}
}

func resizeCases() []opCase {
	var cases []opCase
	modes := []string{"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"}
	for _, mode := range []string{"linear", "nearest"} {
		for _, ctm := range modes {
			if mode == "linear" && ctm == "tf_half_pixel_for_nn" {
				continue
			}
			attrs := []*onnx.AttributeProto{as("mode", mode), as("coordinate_transformation_mode", ctm)}
			cases = append(cases,
				opCase{fmt.Sprintf("%s/%s/scales2", mode, ctm), 0, func(m *opModel) {
					m.node("Resize", []string{m.rand("x", 2, 3, 4, 5), "", m.floats("sc", []int64{4}, 1, 1, 2, 2)}, []string{"y"}, attrs...)
				}},
				opCase{fmt.Sprintf("%s/%s/sizes_odd", mode, ctm), 0, func(m *opModel) {
					m.node("Resize", []string{m.rand("x", 1, 2, 5, 4), "", "", m.ints("sz", []int64{4}, 1, 2, 11, 7)}, []string{"y"}, attrs...)
				}},
				opCase{fmt.Sprintf("%s/%s/down", mode, ctm), 0, func(m *opModel) {
					m.node("Resize", []string{m.rand("x", 1, 2, 9, 8), "", "", m.ints("sz", []int64{4}, 1, 2, 4, 3)}, []string{"y"}, attrs...)
				}})
		}
	}
	for _, nm := range []string{"floor", "ceil", "round_prefer_ceil"} {
		attrs := []*onnx.AttributeProto{as("mode", "nearest"), as("nearest_mode", nm), as("coordinate_transformation_mode", "half_pixel")}
		cases = append(cases, opCase{"nearest_mode/" + nm, 0, func(m *opModel) {
			m.node("Resize", []string{m.rand("x", 1, 2, 5, 4), "", "", m.ints("sz", []int64{4}, 1, 2, 8, 9)}, []string{"y"}, attrs...)
		}})
	}
	cases = append(cases,
		opCase{"opset11_roi_scales", 11, func(m *opModel) {
			m.node("Resize", []string{m.rand("x", 1, 2, 3, 4), m.floats("roi", []int64{0}), m.floats("sc", []int64{4}, 1, 1, 3, 2)}, []string{"y"}, as("mode", "linear"))
		}},
		opCase{"opset10_scales", 10, func(m *opModel) {
			m.node("Resize", []string{m.rand("x", 1, 2, 3, 4), m.floats("sc", []int64{4}, 1, 1, 2, 1.5)}, []string{"y"}, as("mode", "linear"))
		}},
		opCase{"Upsample/opset9_nearest", 9, func(m *opModel) {
			m.node("Upsample", []string{m.rand("x", 1, 2, 3, 4), m.floats("sc", []int64{4}, 1, 1, 2, 2)}, []string{"y"}, as("mode", "nearest"))
		}},
		opCase{"Upsample/opset9_linear", 9, func(m *opModel) {
			m.node("Upsample", []string{m.rand("x", 1, 2, 3, 4), m.floats("sc", []int64{4}, 1, 1, 2, 3)}, []string{"y"}, as("mode", "linear"))
		}},
		opCase{"Upsample/opset7_attr", 7, func(m *opModel) {
			m.node("Upsample", []string{m.rand("x", 1, 2, 3, 4)}, []string{"y"}, as("mode", "nearest"), afs("scales", 1, 1, 2, 2))
		}},
		opCase{"dynamic_sizes_from_shape", 0, func(m *opModel) {
			// Shape → Slice → Concat → Resize sizes, as exporters write it.
			m.node("Shape", []string{m.rand("ref", 1, 2, 8, 6)}, []string{"s"})
			m.node("Slice", []string{"s", m.ints("b", []int64{1}, 2), m.ints("e", []int64{1}, 4)}, []string{"hw"})
			m.node("Concat", []string{m.ints("nc", []int64{2}, 1, 2), "hw"}, []string{"sz"}, ai("axis", 0))
			m.node("Resize", []string{m.rand("x", 1, 2, 3, 4), "", "", "sz"}, []string{"r"}, as("mode", "linear"), as("coordinate_transformation_mode", "align_corners"))
			m.node("Add", []string{"r", "ref"}, []string{"y"})
		}},
	)
	return cases
}
