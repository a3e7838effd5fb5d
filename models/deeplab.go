package models

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/onnx"
)

// Stage is one stage of a MobileNetV2 backbone: Repeat inverted residual
// blocks of expansion Expand producing Channels channels (before the width
// multiplier), the first of them with stride Stride.
type Stage struct {
	Expand, Channels, Repeat, Stride int
}

// MobileNetV2Stages is MobileNetV2's table of stages (t, c, n, s) after the
// 32-channel stem, without the final 1×1 convolution to 1280 channels,
// which DeepLab does not use.
var MobileNetV2Stages = []Stage{
	{1, 16, 1, 1},
	{6, 24, 2, 2},
	{6, 32, 3, 2},
	{6, 64, 4, 2},
	{6, 96, 3, 1},
	{6, 160, 3, 2},
	{6, 320, 1, 1},
}

// The numbers of a DeepLabConfig as a user gives them: the width
// multiplier, the output stride (8 or 16: withDefaults refuses the
// others) and the classes of a new network's head.
var (
	WidthRange        = setting.Range{Min: 0, MinOpen: true, Max: 4}
	OutputStrideRange = setting.Range{Min: 8, Max: 16}
	ClassesRange      = setting.Range{Min: 2, Max: 65536}
)

// DeepLabConfig configures DeepLabV3Plus. Zero fields take the values of
// DefaultDeepLabConfig.
type DeepLabConfig struct {
	// Classes is the number of output channels K.
	Classes int `json:"classes"`
	// Width multiplies every backbone channel count (rounded to multiples
	// of 8, as MobileNetV2 does), e.g. 0.35, 0.5, 0.75, 1.0.
	Width float64 `json:"width"`
	// Stages is the backbone; nil means MobileNetV2Stages. The low-level
	// features the decoder reads are the last ones at stride 4, so the
	// stages must reach stride 4 and then OutputStride.
	Stages []Stage `json:"stages,omitempty"`
	// Depth, when > 0, caps every stage's Repeat (1 gives the shallowest
	// network with the same strides and channels).
	Depth int `json:"depth,omitempty"`
	// OutputStride is the encoder's stride, 16 or 8: the stages that
	// would stride further run at stride 1 with dilated depthwise
	// convolutions instead.
	OutputStride int `json:"output_stride"`
	// ASPPChannels is the width of every ASPP branch and of its projection.
	ASPPChannels int `json:"aspp_channels"`
	// ASPPRates are the dilation rates of the atrous 3×3 branches.
	// DeepLab's 6/12/18 suit 513×513 inputs (33×33 features at output
	// stride 16); the default 2/4/6 suits the 100–250-pixel inputs this
	// small network is meant for. With OutputStride 8 the default rates
	// are doubled, as DeepLab does.
	ASPPRates []int `json:"aspp_rates"`
	// LowLevelChannels is the width of the decoder's projection of the
	// stride-4 features; DecoderChannels the width of its two 3×3 convs.
	LowLevelChannels int `json:"low_level_channels"`
	DecoderChannels  int `json:"decoder_channels"`
	// Seed fixes the Kaiming-normal initial weights.
	Seed uint64 `json:"seed"`
}

// DefaultDeepLabConfig is the small DeepLabV3+ segtune trains from scratch
// (the segtune-synth model): width 0.5, MobileNetV2 depth, output stride
// 16, 64-channel ASPP with rates 2/4/6, a 24-channel low-level projection
// and a 64-channel decoder, 3 classes — about 0.9 M parameters (0.56 M at width 0.35, 2.5 M at 1.0).
func DefaultDeepLabConfig() DeepLabConfig {
	return DeepLabConfig{
		Classes: 3, Width: 0.5, Stages: slices.Clone(MobileNetV2Stages), OutputStride: 16,
		ASPPChannels: 64, ASPPRates: []int{2, 4, 6}, LowLevelChannels: 24, DecoderChannels: 64, Seed: 1,
	}
}

// withDefaults fills the zero fields and checks the result.
func (c DeepLabConfig) withDefaults() (DeepLabConfig, error) {
	d := DefaultDeepLabConfig()
	if c.Classes == 0 {
		c.Classes = d.Classes
	}
	if c.Width == 0 {
		c.Width = d.Width
	}
	if c.Stages == nil {
		c.Stages = d.Stages
	}
	if c.OutputStride == 0 {
		c.OutputStride = d.OutputStride
	}
	if c.ASPPChannels == 0 {
		c.ASPPChannels = d.ASPPChannels
	}
	if c.ASPPRates == nil {
		c.ASPPRates = d.ASPPRates
		if c.OutputStride == 8 {
			c.ASPPRates = []int{4, 8, 12}
		}
	}
	if c.LowLevelChannels == 0 {
		c.LowLevelChannels = d.LowLevelChannels
	}
	if c.DecoderChannels == 0 {
		c.DecoderChannels = d.DecoderChannels
	}
	c.Stages = slices.Clone(c.Stages)
	c.ASPPRates = slices.Clone(c.ASPPRates)
	switch {
	case c.Classes < 1:
		return c, fmt.Errorf("classes %d must be at least 1", c.Classes)
	case !(c.Width > WidthRange.Min) || c.Width > WidthRange.Max:
		return c, fmt.Errorf("width multiplier %v must be in (0, %g]", c.Width, WidthRange.Max)
	case c.OutputStride != 8 && c.OutputStride != 16:
		return c, fmt.Errorf("output stride %d must be 8 or 16", c.OutputStride)
	case c.Depth < 0:
		return c, fmt.Errorf("depth %d must not be negative", c.Depth)
	case c.ASPPChannels < 1 || c.LowLevelChannels < 1 || c.DecoderChannels < 1:
		return c, fmt.Errorf("ASPP, low-level and decoder channels (%d, %d, %d) must be positive",
			c.ASPPChannels, c.LowLevelChannels, c.DecoderChannels)
	case len(c.Stages) == 0:
		return c, fmt.Errorf("no backbone stages")
	}
	for i, s := range c.Stages {
		if s.Expand < 1 || s.Channels < 1 || s.Repeat < 1 || (s.Stride != 1 && s.Stride != 2) {
			return c, fmt.Errorf("stage %d %+v: expand, channels and repeat must be positive and stride 1 or 2", i, s)
		}
		if c.Depth > 0 {
			c.Stages[i].Repeat = min(s.Repeat, c.Depth)
		}
	}
	for _, r := range c.ASPPRates {
		if r < 1 {
			return c, fmt.Errorf("ASPP rate %d must be positive", r)
		}
	}
	return c, nil
}

// makeDivisible rounds v to a multiple of 8, never below 8 nor more than
// 10% below v (MobileNet's channel rounding).
func makeDivisible(v float64) int {
	n := max(8, int(v+4)/8*8)
	if float64(n) < 0.9*v {
		n += 8
	}
	return n
}

// DeepLabV3Plus builds a DeepLabV3+ segmentation network with a
// MobileNetV2-style backbone, ready to train from scratch:
//
//   - backbone: a 3×3 stride-2 stem (32 channels × width) and inverted
//     residual blocks (1×1 expand + ReLU6, 3×3 depthwise + ReLU6, 1×1
//     linear projection, residual Add where stride is 1 and the channels
//     match); once the stride reaches OutputStride, later strides become
//     dilations of the depthwise convolutions;
//   - ASPP on the last features: a 1×1 branch, one atrous 3×3 branch per
//     rate and an image-pooling branch (GlobalAveragePool, 1×1 conv, ReLU,
//     bilinear Resize back), concatenated and projected by a 1×1 conv;
//   - decoder: a 1×1 projection of the stride-4 features, the ASPP output
//     resized bilinearly to their size, Concat, two 3×3 convs with ReLU;
//   - classifier: a 1×1 conv to K classes ("classifier.weight/bias"),
//     then a bilinear Resize to the input size.
//
// The input is "input" float32 [N,3,H,W] and the output "logits"
// [N,K,H,W], with N, H and W dynamic; any H, W ≥ 1 works (sizes that are
// not multiples of the stride are rounded up by the strided convs and
// resized back). Batch normalisation is folded, i.e. every conv has a bias
// and there is no normalisation layer, so the graph uses only Conv, Clip,
// Relu, Add, Concat, GlobalAveragePool, Shape, Slice and Resize (linear,
// half_pixel), all of which onnx/grad differentiates. Weights are
// Kaiming-normal (gain √2 before an activation, 1 for linear projections)
// drawn from cfg.Seed, biases zero, and the last projection of every
// residual block starts at zero so that each block is the identity at
// initialisation, which keeps a normalisation-free network trainable.
func DeepLabV3Plus(cfg DeepLabConfig) (*onnx.Model, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("models: DeepLabV3Plus: %w", err)
	}
	g := newGraph(cfg.Seed)
	relu := math.Sqrt2

	// Backbone.
	cin := makeDivisible(32 * cfg.Width)
	x := g.relu6("backbone.stem/act", g.conv("backbone.stem", "input", 3, cin, 3, 2, 1, 1, relu))
	stride, rate := 2, 1
	low, lowC := "", 0
	block := 0
	for _, s := range cfg.Stages {
		cout := makeDivisible(float64(s.Channels) * cfg.Width)
		for r := 0; r < s.Repeat; r++ {
			st, dil := 1, rate
			if r == 0 && s.Stride == 2 {
				if stride == cfg.OutputStride {
					dil, rate = rate, rate*2
				} else {
					st, stride = 2, stride*2
				}
			}
			p := fmt.Sprintf("backbone.block%d", block)
			block++
			h := x
			hid := cin * s.Expand
			if s.Expand != 1 {
				h = g.relu6(p+".expand/act", g.conv(p+".expand", h, cin, hid, 1, 1, 1, 1, relu))
			}
			h = g.relu6(p+".depthwise/act", g.conv(p+".depthwise", h, hid, hid, 3, st, dil, hid, relu))
			residual := st == 1 && cin == cout
			gain := 1.0
			if residual {
				gain = 0
			}
			h = g.conv(p+".project", h, hid, cout, 1, 1, 1, 1, gain)
			if residual {
				h = g.Node("Add", p+".add", []string{x, h})
			}
			x, cin = h, cout
		}
		if stride == 4 {
			low, lowC = x, cin
		}
	}
	if low == "" {
		return nil, fmt.Errorf("models: DeepLabV3Plus: the backbone never runs at stride 4, so the decoder has no low-level features")
	}
	if stride != cfg.OutputStride {
		return nil, fmt.Errorf("models: DeepLabV3Plus: the backbone reaches stride %d, not the output stride %d", stride, cfg.OutputStride)
	}

	// ASPP.
	a := cfg.ASPPChannels
	branches := []string{g.relu("aspp.b0/act", g.conv("aspp.b0", x, cin, a, 1, 1, 1, 1, relu))}
	for i, r := range cfg.ASPPRates {
		p := fmt.Sprintf("aspp.b%d", i+1)
		branches = append(branches, g.relu(p+"/act", g.conv(p, x, cin, a, 3, 1, r, 1, relu)))
	}
	pooled := g.Node("GlobalAveragePool", "aspp.pool/gap", []string{x})
	pooled = g.relu("aspp.pool/act", g.conv("aspp.pool", pooled, cin, a, 1, 1, 1, 1, relu))
	branches = append(branches, g.resizeLike("aspp.pool/resize", pooled, x))
	cat := g.Node("Concat", "aspp.concat", branches, onnx.IntAttr("axis", 1))
	aspp := g.relu("aspp.project/act", g.conv("aspp.project", cat, a*len(branches), a, 1, 1, 1, 1, relu))

	// Decoder.
	l := g.relu("decoder.low/act", g.conv("decoder.low", low, lowC, cfg.LowLevelChannels, 1, 1, 1, 1, relu))
	up := g.resizeLike("decoder.upsample", aspp, l)
	h := g.Node("Concat", "decoder.concat", []string{up, l}, onnx.IntAttr("axis", 1))
	d := cfg.DecoderChannels
	h = g.relu("decoder.conv1/act", g.conv("decoder.conv1", h, a+cfg.LowLevelChannels, d, 3, 1, 1, 1, relu))
	h = g.relu("decoder.conv2/act", g.conv("decoder.conv2", h, d, d, 3, 1, 1, 1, relu))
	h = g.conv("classifier", h, d, cfg.Classes, 1, 1, 1, 1, 1)
	out := g.resizeLike("logits", h, "input")

	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return g.model("deeplabv3plus",
		fmt.Sprintf("DeepLabV3+ (MobileNetV2 backbone, width %g, output stride %d), %d classes, %d parameters; built by segtune/models",
			cfg.Width, cfg.OutputStride, cfg.Classes, g.params),
		floatValue("input", "batch", 3, "height", "width"),
		[]*onnx.ValueInfoProto{floatValue(out, "batch", cfg.Classes, "height", "width")},
		map[string]string{MetaArchitecture: "deeplabv3plus", MetaConfig: string(js)}), nil
}

// WriteNewDeepLab writes a freshly initialised DeepLabV3+ of cfg to path,
// with a sidecar that feeds it inputs scaled to [-1, 1], and returns its
// parameter count and the sidecar's path.
func WriteNewDeepLab(path string, cfg DeepLabConfig) (params int64, sidecar string, err error) {
	m, err := DeepLabV3Plus(cfg)
	if err != nil {
		return 0, "", err
	}
	if err := m.Save(path); err != nil {
		return 0, "", err
	}
	side := imageio.Sidecar{Version: imageio.SidecarVersion, Preprocess: &imageio.Preprocess{ValueScale: 1 / 127.5, ValueOffset: -1}}
	sidecar = imageio.SidecarPath(path)
	return m.Summary().Parameters, sidecar, side.Save(sidecar)
}
