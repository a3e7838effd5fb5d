package grad

import "testing"

func TestConvClasses(t *testing.T) {
	cases := []struct {
		w     []int64
		group int64
		want  ConvClasses
	}{
		{[]int64{32, 16, 3, 3}, 1, ConvDense},
		{[]int64{32, 16, 1, 3}, 1, ConvDense},
		{[]int64{32, 16, 1, 1}, 1, ConvPointwise},
		{[]int64{32, 1, 3, 3}, 32, ConvDepthwise},
		{[]int64{32, 1, 1, 1}, 32, ConvDepthwise},
		{[]int64{32, 4, 3, 3}, 8, ConvGrouped},
	}
	for _, c := range cases {
		if got := ClassOfConv(c.w, c.group); got != c.want {
			t.Errorf("ClassOfConv(%v, %d) = %v, want %v", c.w, c.group, got, c.want)
		}
	}
	for _, s := range []string{"none", "all", "dense", "dense,depthwise", "pointwise,grouped"} {
		set, err := ParseConvClasses(s)
		if err != nil {
			t.Fatal(err)
		}
		if set.String() != s {
			t.Errorf("ParseConvClasses(%q).String() = %q", s, set.String())
		}
	}
	if set, _ := ParseConvClasses("depthwise, dense"); set != ConvDense|ConvDepthwise {
		t.Errorf("a list with spaces: %v", set)
	}
	if _, err := ParseConvClasses("dense,winograd"); err == nil {
		t.Error("an unknown class was accepted")
	}
}
