package network

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/onnx"
)

// TrainableHelp describes the specs Trainable accepts, for flag usage text.
const TrainableHelp = "all | classifier | decoder | last:N | skip:N | name patterns (glob, or re:REGEXP), comma-separated"

// QuantizedError is a quantized model asked to train: its weights are
// integers (ConvInteger, QLinearConv, QDQ pairs), which gradients cannot
// move.
type QuantizedError struct{ Ops onnx.Quantization }

func (e *QuantizedError) Error() string { return e.Named(setting.Key) }

// Named is the message with its setting called name(key).
func (e *QuantizedError) Named(name func(key string) string) string {
	return setting.Sprintf(name, "the model is quantized (%s): its weights are integers, which do not train; fine-tuning with {dequantize} trains it with them turned into float weights (scale × (q − zero point)), or fine-tune the float model it was quantized from; an int8 export quantizes the result again", e.Ops)
}

// Trainable resolves a trainable-parameter spec to initializer names, in
// the order of the layers:
//
//	all           every layer's parameters
//	classifier    the final classifier only
//	decoder       every layer after the network's first upsampling (for a
//	              DeepLabV3+: the ASPP merge, decoder and classifier)
//	last:N        the last N layers
//	skip:N        all but the first N layers
//	PATTERN,...   parameters whose names match a glob (*, ?) or re:REGEXP
func Trainable(m *onnx.Model, spec string) ([]string, error) {
	// A quantized model is named before its layers are looked at: the
	// float biases or activations some keep would train on their own.
	if q := onnx.Quantized(m); len(q) > 0 {
		return nil, &QuantizedError{Ops: q}
	}
	layers, err := Layers(m)
	if err != nil {
		return nil, err
	}
	if len(layers) == 0 {
		return nil, fmt.Errorf("the model has no layers with float parameters")
	}
	spec = strings.TrimSpace(spec)
	var chosen []Layer
	switch {
	case spec == "" || spec == "all":
		chosen = layers
	case spec == "classifier":
		c, err := Classifier(m)
		if err != nil {
			return nil, err
		}
		chosen = []Layer{c}
	case spec == "decoder":
		up, err := firstUpsample(m)
		if err != nil {
			return nil, err
		}
		if up < 0 {
			return nil, fmt.Errorf("trainable %q: the model has no Resize/Upsample to tell the decoder from the encoder; use last:N", spec)
		}
		for _, l := range layers {
			if l.Index > up {
				chosen = append(chosen, l)
			}
		}
	case strings.HasPrefix(spec, "last:") || strings.HasPrefix(spec, "skip:"):
		kind, num, _ := strings.Cut(spec, ":")
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || n > len(layers) {
			return nil, fmt.Errorf("trainable %q: N must be 0..%d, the number of layers", spec, len(layers))
		}
		if kind == "last" {
			chosen = layers[len(layers)-n:]
		} else {
			chosen = layers[n:]
		}
	default:
		return matchParams(layers, spec)
	}
	var out []string
	for _, l := range chosen {
		out = append(out, l.Params...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("trainable %q selects no parameters", spec)
	}
	return out, nil
}

func matchParams(layers []Layer, spec string) ([]string, error) {
	var out []string
	for _, pat := range strings.Split(spec, ",") {
		pat = strings.TrimSpace(pat)
		var re *regexp.Regexp
		var err error
		if rest, ok := strings.CutPrefix(pat, "re:"); ok {
			re, err = regexp.Compile("^(?:" + rest + ")$")
		} else {
			re, err = regexp.Compile("^" + strings.ReplaceAll(strings.ReplaceAll(regexp.QuoteMeta(pat), `\*`, ".*"), `\?`, ".") + "$")
		}
		if err != nil {
			return nil, fmt.Errorf("trainable pattern %q: %w", pat, err)
		}
		n := 0
		for _, l := range layers {
			for _, p := range l.Params {
				if re.MatchString(p) {
					out = append(out, p)
					n++
				}
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("trainable pattern %q matches no parameter (presets: %s)", pat, TrainableHelp)
		}
	}
	return dedupe(out), nil
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0]
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
