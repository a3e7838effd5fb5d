package contract

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/onnx"
)

// node is one node of a test graph: its inputs comma-separated; 0 in a
// value's dims means dynamic.
type node struct {
	op, in, out string
	attrs       []*onnx.AttributeProto
}

func model(opset int64, in, out *onnx.ValueInfoProto, nodes ...node) *onnx.Model {
	b := &onnx.Builder{}
	for i, n := range nodes {
		b.Emit(n.op, n.op+string(rune('a'+i)), strings.Split(n.in, ","), []string{n.out}, n.attrs...)
	}
	return onnx.NewModel(b.Graph("g", []*onnx.ValueInfoProto{in}, []*onnx.ValueInfoProto{out}), opset)
}

func f32(name string, dims ...int64) *onnx.ValueInfoProto {
	return onnx.TensorValueInfo(name, onnx.Float32, dims...)
}

func read(t *testing.T, m *onnx.Model, o Overrides) *Contract {
	t.Helper()
	c, err := Read(m, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestReadLayouts(t *testing.T) {
	toNCHW := onnx.IntsAttr("perm", 0, 3, 1, 2)
	toNHWC := onnx.IntsAttr("perm", 0, 2, 3, 1)
	for _, tc := range []struct {
		name            string
		m               *onnx.Model
		o               Overrides
		in, out         Layout
		kind            Kind
		scores          string
		scoresAxis, cls int
		batch, h, w     int64
		inFrom, outFrom string
	}{
		{name: "torchvision NCHW logits", m: model(13, f32("x", 0, 3, 0, 0), f32("y", 0, 5, 0, 0), node{op: "Conv", in: "x,w", out: "y"}),
			in: NCHW, out: NCHW, kind: Logits, scores: "y", scoresAxis: 1, cls: 5, inFrom: "graph", outFrom: "shape"},
		{name: "tf2onnx NHWC behind Transposes", m: model(9, f32("x", 0, 0, 0, 3), f32("y", 0, 0, 0, 0),
			node{op: "Transpose", in: "x", out: "t", attrs: []*onnx.AttributeProto{toNCHW}},
			node{op: "Conv", in: "t,w", out: "z"},
			node{op: "Transpose", in: "z", out: "y", attrs: []*onnx.AttributeProto{toNHWC}}),
			in: NHWC, out: NHWC, kind: Logits, scores: "y", scoresAxis: 3, inFrom: "graph", outFrom: "graph"},
		{name: "OpenVINO fixed NHWC with Softmax on the last axis", m: model(13, f32("x", 1, 64, 96, 3), f32("p", 1, 64, 96, 4),
			node{op: "Transpose", in: "x", out: "t", attrs: []*onnx.AttributeProto{toNCHW}},
			node{op: "Conv", in: "t,w", out: "z"},
			node{op: "Transpose", in: "z", out: "zt", attrs: []*onnx.AttributeProto{toNHWC}},
			node{op: "Softmax", in: "zt", out: "p", attrs: []*onnx.AttributeProto{onnx.IntAttr("axis", -1)}}),
			in: NHWC, out: NHWC, kind: Softmax, scores: "zt", scoresAxis: 3, cls: 4, batch: 1, h: 64, w: 96, inFrom: "shape", outFrom: "graph"},
		{name: "Softmax then Transpose", m: model(13, f32("x", 0, 3, 0, 0), f32("p", 0, 0, 0, 0),
			node{op: "Conv", in: "x,w", out: "z"},
			node{op: "Softmax", in: "z", out: "s", attrs: []*onnx.AttributeProto{onnx.IntAttr("axis", 1)}},
			node{op: "Transpose", in: "s", out: "p", attrs: []*onnx.AttributeProto{toNHWC}}),
			in: NCHW, out: NHWC, kind: Softmax, scores: "z", scoresAxis: 1, inFrom: "graph", outFrom: "graph"},
		{name: "Softmax axis alone tells NHWC", m: model(13, f32("x", 0, 8, 8, 3), f32("p", 0, 0, 0, 0),
			node{op: "Mul", in: "x,k", out: "z"},
			node{op: "Softmax", in: "z", out: "p", attrs: []*onnx.AttributeProto{onnx.IntAttr("axis", 3)}}),
			in: NHWC, out: NHWC, kind: Softmax, scores: "z", scoresAxis: 3, h: 8, w: 8, inFrom: "shape", outFrom: "graph"},
		{name: "SMP sigmoid", m: model(13, f32("x", 0, 3, 0, 0), f32("y", 0, 4, 0, 0),
			node{op: "Conv", in: "x,w", out: "z"}, node{op: "Sigmoid", in: "z", out: "y"}),
			in: NCHW, out: NCHW, kind: Sigmoid, scores: "z", scoresAxis: 1, cls: 5, inFrom: "graph", outFrom: "shape"},
		{name: "nothing tells the output: --nhwc covers it", m: model(13, f32("x", 0, 0, 0, 3), f32("y", 0, 0, 0, 0),
			node{op: "Identity", in: "x", out: "y"}), o: Overrides{InputLayout: NHWC},
			in: NHWC, out: NHWC, kind: Logits, scores: "y", scoresAxis: 3, inFrom: "flag", outFrom: "input layout flag"},
		{name: "--output-layout beats the graph", m: model(13, f32("x", 0, 3, 0, 0), f32("y", 0, 5, 0, 0), node{op: "Conv", in: "x,w", out: "y"}),
			o: Overrides{OutputLayout: NHWC}, in: NCHW, out: NHWC, kind: Logits, scores: "y", scoresAxis: 3, cls: 0, inFrom: "graph", outFrom: "flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := read(t, tc.m, tc.o)
			got := []any{c.InputLayout, c.OutputLayout, c.Kind, c.Scores, c.ScoresClassAxis, c.Classes, c.Batch, c.Height, c.Width, c.InputLayoutFrom, c.OutputLayoutFrom}
			want := []any{tc.in, tc.out, tc.kind, tc.scores, tc.scoresAxis, tc.cls, tc.batch, tc.h, tc.w, tc.inFrom, tc.outFrom}
			if !slices.Equal(got, want) {
				t.Errorf("got  %v\nwant %v", got, want)
			}
		})
	}
}

func TestReadRefuses(t *testing.T) {
	u8 := onnx.TensorValueInfo("x", onnx.Uint8, 1, 0, 0, 3)
	// What no setting can fix is an UnsupportedError; what naming the
	// layout fixes, a LayoutError.
	for name, c := range map[string]struct {
		m           *onnx.Model
		unsupported bool
	}{
		"uint8 input":   {model(13, u8, f32("y", 1, 0, 0, 4), node{op: "Identity", in: "x", out: "y"}), true},
		"4 channels":    {model(13, f32("x", 1, 4, 8, 8), f32("y", 1, 2, 8, 8), node{op: "Identity", in: "x", out: "y"}), false},
		"3-D float out": {model(13, f32("x", 1, 3, 8, 8), f32("y", 1, 8, 8), node{op: "Identity", in: "x", out: "y"}), true},
		"rank-2 input":  {model(13, f32("x", 1, 3), f32("y", 1, 2), node{op: "Identity", in: "x", out: "y"}), true},
	} {
		_, err := Read(c.m, Overrides{})
		var ue *UnsupportedError
		var le *LayoutError
		switch {
		case err == nil:
			t.Errorf("%s: accepted", name)
		case c.unsupported && !errors.As(err, &ue):
			t.Errorf("%s: %v, want an UnsupportedError", name, err)
		case !c.unsupported && (!errors.As(err, &le) || !le.Input || le.Try != NHWC):
			t.Errorf("%s: %v, want a LayoutError of the input advising NHWC", name, err)
		}
	}
}

func TestClassScores(t *testing.T) {
	// Two pixels, two channels, NHWC: pixel 0 = (0.9, 0.2), pixel 1 = (0.3, 0.4).
	c := &Contract{Output: "y", OutputLayout: NHWC, Kind: Sigmoid, Channels: 2, Threshold: 0.5}
	s, classes, h, w, err := c.ClassScores([]float32{0.9, 0.2, 0.3, 0.4}, []int64{1, 2, 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{0.5, 0.5, 0.9, 0.3, 0.2, 0.4} // background plane, then channels as planes
	if classes != 3 || h != 1 || w != 2 || !slices.Equal(s, want) {
		t.Fatalf("scores %v (%d classes, %dx%d), want %v", s, classes, h, w, want)
	}
	// NCHW logits come back as they are, without a copy.
	c = &Contract{Output: "y", OutputLayout: NCHW, Kind: Logits, Channels: 2}
	in := []float32{1, 2, 3, 4}
	s, _, _, _, err = c.ClassScores(in, []int64{2, 1, 2}, nil)
	if err != nil || &s[0] != &in[0] {
		t.Fatalf("NCHW logits copied or refused: %v", err)
	}
	// A channel count that differs from the contract's is a misread layout.
	var le *LayoutError
	if _, _, _, _, err := c.ClassScores(make([]float32, 6), []int64{3, 1, 2}, nil); !errors.As(err, &le) || le.Input || le.Try != "" {
		t.Fatalf("err = %v, want a LayoutError of the output that cannot tell which layout", err)
	}
}

func TestCheckRun(t *testing.T) {
	c := &Contract{Output: "y", OutputLayout: NCHW, Kind: Softmax}
	// [1, 64, 64, 3] read as NCHW: spatial 64×3 does not follow a 64×64 input.
	var le *LayoutError
	if err := c.CheckRun([]int64{1, 64, 64, 3}, 64, 64); !errors.As(err, &le) || le.Try != NHWC ||
		!strings.HasSuffix(err.Error(), "if the output is NHWC, pass output_layout nhwc") || strings.Contains(err.Error(), "--") {
		t.Fatalf("misread NHWC output: %v, want a LayoutError advising NHWC in the library's words", err)
	}
	// 257 channels are more than a mask holds.
	if err := c.CheckRun([]int64{1, 257, 65, 65}, 513, 513); err == nil {
		t.Fatal("257 classes accepted")
	}
	// Output stride 8 with DeepLab's 8k+1 sizes is spatial; the count is learnt.
	if err := c.CheckRun([]int64{1, 21, 65, 65}, 513, 513); err != nil || c.Classes != 21 {
		t.Fatalf("stride-8 output: %v, classes %d", err, c.Classes)
	}
}

// FuzzRead: no graph, however malformed, makes Read panic.
func FuzzRead(f *testing.F) {
	f.Add([]byte{0, 3, 1, 2}, int64(13))
	f.Add([]byte{9, 9, 9, 9}, int64(9))
	f.Fuzz(func(t *testing.T, perm []byte, axis int64) {
		p := make([]int64, len(perm))
		for i, v := range perm {
			p[i] = int64(v) - 2
		}
		m := model(13, f32("x", 0, 3, 0, 0), f32("y", 0, 0, 0, 0),
			node{op: "Conv", in: "x,w", out: "z"},
			node{op: "Softmax", in: "z", out: "s", attrs: []*onnx.AttributeProto{onnx.IntAttr("axis", axis)}},
			node{op: "Transpose", in: "s", out: "y", attrs: []*onnx.AttributeProto{onnx.IntsAttr("perm", p...)}})
		_, _ = Read(m, Overrides{})
	})
}

// One-channel heads are binary: a logit channel (segmentation_models'
// classes=1 without activation) or a sigmoid channel, two classes either
// way; other heads are not.
func TestBinaryHeads(t *testing.T) {
	for _, tc := range []struct {
		name      string
		m         *onnx.Model
		kind      Kind
		binary    bool
		classes   int
		threshold float64
	}{
		{name: "one logit channel", m: model(13, f32("x", 0, 3, 0, 0), f32("y", 0, 1, 0, 0), node{op: "Conv", in: "x,w", out: "y"}),
			kind: Logits, binary: true, classes: 2, threshold: DefaultThreshold},
		{name: "one logit channel, NHWC", m: model(13, f32("x", 0, 0, 0, 3), f32("y", 0, 0, 0, 1), node{op: "Identity", in: "x", out: "y"}),
			kind: Logits, binary: true, classes: 2, threshold: DefaultThreshold},
		{name: "one sigmoid channel", m: model(13, f32("x", 0, 3, 0, 0), f32("y", 0, 1, 0, 0),
			node{op: "Conv", in: "x,w", out: "z"}, node{op: "Sigmoid", in: "z", out: "y"}),
			kind: Sigmoid, classes: 2, threshold: DefaultThreshold},
		{name: "two logit channels", m: model(13, f32("x", 0, 3, 0, 0), f32("y", 0, 2, 0, 0), node{op: "Conv", in: "x,w", out: "y"}),
			kind: Logits, classes: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := read(t, tc.m, Overrides{})
			if c.Kind != tc.kind || c.Binary != tc.binary || c.Classes != tc.classes || c.Threshold != tc.threshold {
				t.Errorf("kind %s binary %v classes %d threshold %v, want %s %v %d %v", c.Kind, c.Binary, c.Classes, c.Threshold,
					tc.kind, tc.binary, tc.classes, tc.threshold)
			}
			if note := c.BinaryNote(); (note != "") != tc.binary || (tc.binary && !strings.Contains(note, "binary")) {
				t.Errorf("note %q", note)
			}
		})
	}
	// A channel count learnt by running the model makes the head binary too.
	c := read(t, model(13, f32("x", 0, 3, 0, 0), f32("y", 0, 0, 0, 0), node{op: "Identity", in: "x", out: "y"}), Overrides{})
	if c.Binary || c.Classes != 0 {
		t.Fatalf("undeclared channels: binary %v, classes %d", c.Binary, c.Classes)
	}
	if err := c.CheckRun([]int64{1, 1, 8, 8}, 8, 8); err != nil || !c.Binary || c.Classes != 2 {
		t.Fatalf("after a run: %v, binary %v, classes %d", err, c.Binary, c.Classes)
	}
	if err := c.CheckClasses(3, "the data set has"); err == nil || !strings.Contains(err.Error(), "binary") {
		t.Errorf("3 data classes for a binary head: %v", err)
	}
}

// A binary head's class 1 is where the logit's sigmoid exceeds the
// threshold: logit 0 at 0.5 (a tie, class 0), log(4) at 0.8.
func TestBinaryClassScores(t *testing.T) {
	logits := []float32{-1, 0, 0.5, 1.2, 2}
	for _, tc := range []struct {
		threshold float64
		want      []uint8
	}{
		{0.5, []uint8{0, 0, 1, 1, 1}},
		{0.8, []uint8{0, 0, 0, 0, 1}},
	} {
		c := &Contract{Output: "y", OutputLayout: NCHW, Kind: Logits, Threshold: tc.threshold}
		c.SetChannels(1)
		s, classes, h, w, err := c.ClassScores(logits, []int64{1, 1, 5}, nil)
		if err != nil || classes != 2 || h != 1 || w != 5 {
			t.Fatalf("threshold %v: %v, %d classes, %dx%d", tc.threshold, err, classes, h, w)
		}
		for i, want := range tc.want {
			got := uint8(0)
			if s[5+i] > s[i] {
				got = 1
			}
			if got != want {
				t.Errorf("threshold %v: logit %v is class %d, want %d", tc.threshold, logits[i], got, want)
			}
		}
	}
}

func TestCheckFinite(t *testing.T) {
	c := &Contract{Output: "y"}
	if err := c.CheckFinite([]float32{0, -3, 1e30}); err != nil {
		t.Fatalf("finite scores refused: %v", err)
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	err := c.CheckFinite([]float32{nan, 1, -inf, nan, inf})
	var nf *NonFiniteError
	if !errors.As(err, &nf) || nf.NaN != 2 || nf.Inf != 2 || nf.Total != 5 || !strings.Contains(err.Error(), `"y"`) {
		t.Fatalf("err = %v (%+v)", err, nf)
	}
	if n := testing.AllocsPerRun(10, func() { _ = c.CheckFinite([]float32{0, 1, 2}) }); n != 0 {
		t.Errorf("CheckFinite allocates %v times on finite scores", n)
	}
}

// Defect: a Softmax (or LogSoftmax) over a single channel, a broken
// binary export, scored 1 everywhere and segmented every image to class 0
// with exit 0. It is refused, whether the graph declares the channel
// count or a first run tells it; one logit channel is still binary.
func TestOneChannelSoftmaxRefused(t *testing.T) {
	for _, op := range []string{"Softmax", "LogSoftmax"} {
		m := model(13, f32("x", 0, 3, 0, 0), f32("p", 0, 1, 0, 0),
			node{op: "Conv", in: "x,w", out: "z"},
			node{op: op, in: "z", out: "p", attrs: []*onnx.AttributeProto{onnx.IntAttr("axis", 1)}})
		if _, err := Read(m, Overrides{}); err == nil || !strings.Contains(err.Error(), "over one channel") {
			t.Errorf("%s over one declared channel: %v", op, err)
		}
		dyn := model(13, f32("x", 0, 3, 0, 0), f32("p", 0, 0, 0, 0),
			node{op: "Conv", in: "x,w", out: "z"},
			node{op: op, in: "z", out: "p", attrs: []*onnx.AttributeProto{onnx.IntAttr("axis", 1)}})
		c, err := Read(dyn, Overrides{})
		if err != nil {
			t.Fatalf("%s, channels not declared: %v", op, err)
		}
		if err := c.CheckRun([]int64{1, 1, 8, 8}, 8, 8); err == nil || !strings.Contains(err.Error(), "over one channel") {
			t.Errorf("%s over one channel at the first run: %v", op, err)
		}
	}
	logit := model(13, f32("x", 0, 3, 0, 0), f32("p", 0, 1, 0, 0), node{op: "Conv", in: "x,w", out: "p"})
	if c := read(t, logit, Overrides{}); !c.Binary || c.Classes != 2 {
		t.Errorf("one logit channel: binary %v, %d classes", c.Binary, c.Classes)
	}
}

// A PyTorch export leaves the output's class axis symbolic, so the class
// count is read from the last convolution's weight; `export --precision
// fp16` puts Casts around that convolution and stores its weight in
// float16 behind a Cast, int8 QDQ exports put QuantizeLinear/
// DequantizeLinear pairs after it and dequantize its weight. The count
// must still be found, or the exported model's contract differs from the
// float model's and the export is refused.
func TestClassesThroughFloat16AndInt8Exports(t *testing.T) {
	weight := func(m *onnx.Model, name string) { // only its dims are read
		m.Graph().Initializer = append(m.Graph().Initializer, onnx.NewFloat32Tensor(name, []int64{5, 3, 1, 1}, make([]float32, 15)))
	}
	fp16 := model(17, f32("x", 0, 3, 0, 0), f32("y", 0, 0, 0, 0),
		node{op: "Cast", in: "x", out: "xh"},
		node{op: "Cast", in: "w32", out: "wh"},
		node{op: "Conv", in: "xh,wh", out: "zh"},
		node{op: "Cast", in: "zh", out: "z"},
		node{op: "Resize", in: "z,,s", out: "y"})
	weight(fp16, "w32")
	qdq := model(17, f32("x", 0, 3, 0, 0), f32("y", 0, 0, 0, 0),
		node{op: "QuantizeLinear", in: "x,xs,xz", out: "xq"},
		node{op: "DequantizeLinear", in: "xq,xs,xz", out: "xd"},
		node{op: "DequantizeLinear", in: "wq,ws,wz", out: "wd"},
		node{op: "Conv", in: "xd,wd", out: "z"},
		node{op: "QuantizeLinear", in: "z,zs,zz", out: "zq"},
		node{op: "DequantizeLinear", in: "zq,zs,zz", out: "zd"},
		node{op: "Resize", in: "zd,,s", out: "y"})
	weight(qdq, "wq")
	for name, m := range map[string]*onnx.Model{"fp16": fp16, "int8 QDQ": qdq} {
		if c := read(t, m, Overrides{}); c.Classes != 5 {
			t.Errorf("%s: %d classes, want 5 (the convolution's output channels)", name, c.Classes)
		}
	}
}
