package imageio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/regfile"
)

// SidecarVersion is the sidecar format version written by Save.
const SidecarVersion = 1

// SidecarExt replaces a model file's extension to name its sidecar.
const SidecarExt = ".segtune.json"

// Sidecar is the JSON file kept next to a model (model.onnx →
// model.segtune.json) so its users need not retype how to feed it:
//
//	{
//	  "version": 1,
//	  "preprocess": {"height": 513, "width": 513, "resize": "stretch",
//	                 "value_scale": 0.00784313725490196, "value_offset": -1},
//	  "classes": ["background", "person"],
//	  "palette": ["#000000", "#c00000"],
//	  "label_map": "9,10:1;11:255;*:0",
//	  "ignore_label": 255
//	}
type Sidecar struct {
	Version    int         `json:"version"`
	Preprocess *Preprocess `json:"preprocess,omitempty"`
	// Classes names the model's output channels, in order.
	Classes []string `json:"classes,omitempty"`
	// Palette colours masks and overlays, entry i for class i.
	Palette Palette `json:"palette,omitempty"`
	// LabelMap turns data set masks into the model's classes.
	LabelMap *LabelMap `json:"label_map,omitempty"`
	// IgnoreLabel marks mask pixels left out of training and scoring.
	IgnoreLabel *int `json:"ignore_label,omitempty"`
	// Output says how to read the model's output where its graph cannot.
	Output *OutputSpec `json:"output,omitempty"`
}

// OutputSpec says how to read a model's output: its layout ("NCHW" or
// "NHWC"; empty: read from the graph) and, for sigmoid multi-label heads,
// the probability a channel must exceed to claim a pixel (0: 0.5).
type OutputSpec struct {
	Layout    Layout  `json:"layout,omitempty"`
	Threshold float64 `json:"threshold,omitempty"`
}

// Validate checks the layout and the threshold.
func (o *OutputSpec) Validate() error {
	switch strings.ToUpper(string(o.Layout)) {
	case "", "NCHW", "NHWC":
	default:
		return fmt.Errorf("output layout %q: want NCHW or NHWC", o.Layout)
	}
	if o.Threshold < 0 || o.Threshold >= 1 || o.Threshold != o.Threshold {
		return fmt.Errorf("threshold %v is outside [0, 1)", o.Threshold)
	}
	return nil
}

// MaxSidecarBytes bounds the size of a sidecar or --preprocess file
// (1 MiB; a palette of 256 colours and a label map take a few KB).
const MaxSidecarBytes = 1 << 20

// SidecarPath returns the sidecar path of a model file.
func SidecarPath(modelPath string) string {
	return strings.TrimSuffix(modelPath, filepath.Ext(modelPath)) + SidecarExt
}

// LoadSidecar reads and validates a sidecar file (a regular file of at
// most MaxSidecarBytes). Unknown fields are errors, so a misspelt key
// cannot silently fall back to a default.
func LoadSidecar(path string) (*Sidecar, error) {
	data, err := regfile.ReadSmall(path, MaxSidecarBytes)
	if err != nil {
		return nil, fmt.Errorf("read sidecar: %w", err)
	}
	return ParseSidecar(data, path)
}

// ParseSidecar decodes and validates sidecar JSON (a sidecar or a
// --preprocess file); name is used in errors.
func ParseSidecar(data []byte, name string) (*Sidecar, error) {
	if len(data) > MaxSidecarBytes {
		return nil, fmt.Errorf("sidecar %s: larger than %d bytes", name, MaxSidecarBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Sidecar
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("sidecar %s: %w", name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("sidecar %s: unexpected data after the JSON object", name)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("sidecar %s: %w", name, err)
	}
	return &s, nil
}

// LoadModelSidecar loads the sidecar of a model file; found is false (and
// the result empty) when there is none.
func LoadModelSidecar(modelPath string) (s *Sidecar, found bool, err error) {
	s, err = LoadSidecar(SidecarPath(modelPath))
	if errors.Is(err, fs.ErrNotExist) {
		return &Sidecar{Version: SidecarVersion}, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return s, true, nil
}

// ContractKey is the ONNX metadata_props key under which a model carries
// its settings (the sidecar's JSON, on one line), so that the model file
// alone says how to feed it: export and fine-tuning write it, and every
// command reads it below the sidecar and above the registry.
const ContractKey = "segtune.contract"

// Compact validates s and returns it as one line of JSON (ContractKey's
// value).
func (s Sidecar) Compact() ([]byte, error) {
	if s.Version == 0 {
		s.Version = SidecarVersion
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	data, err := json.Marshal(&s)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSidecarBytes {
		return nil, fmt.Errorf("settings take %d bytes, more than the %d a sidecar may", len(data), MaxSidecarBytes)
	}
	return data, nil
}

// Save validates s and writes it to path atomically, indented for people.
func (s *Sidecar) Save(path string) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("save sidecar %s: %w", path, err)
	}
	c := *s
	if c.Version == 0 {
		c.Version = SidecarVersion
	}
	data, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return fmt.Errorf("save sidecar %s: %w", path, err)
	}
	data = append(data, '\n')
	return atomicfile.Write(path, data, 0o644)
}

// Validate checks the version, the preprocessing and that a palette or
// ignore label fits the classes.
func (s *Sidecar) Validate() error {
	if s.Version > SidecarVersion {
		return fmt.Errorf("version %d is newer than this segtune understands (%d)", s.Version, SidecarVersion)
	}
	if s.Version < 0 {
		return fmt.Errorf("invalid version %d", s.Version)
	}
	if s.Preprocess != nil {
		if err := s.Preprocess.Validate(); err != nil {
			return err
		}
	}
	if s.Output != nil {
		if err := s.Output.Validate(); err != nil {
			return err
		}
	}
	if s.IgnoreLabel != nil && (*s.IgnoreLabel < 0 || *s.IgnoreLabel > MaxLabel) {
		return fmt.Errorf("ignore_label %d is outside 0..%d", *s.IgnoreLabel, MaxLabel)
	}
	if len(s.Palette) > 256 {
		return fmt.Errorf("palette has %d colours; masks hold at most 256", len(s.Palette))
	}
	return nil
}

// Merge returns s with every field set in o replacing s's (o being the
// explicit overrides, e.g. from command-line flags). Preprocess merges
// field by field (see Preprocess.Merge).
func (s Sidecar) Merge(o Sidecar) Sidecar {
	if o.Version != 0 {
		s.Version = o.Version
	}
	switch {
	case o.Preprocess != nil && s.Preprocess != nil:
		m := s.Preprocess.Merge(*o.Preprocess)
		s.Preprocess = &m
	case o.Preprocess != nil:
		c := *o.Preprocess
		s.Preprocess = &c
	}
	if o.Classes != nil {
		s.Classes = o.Classes
	}
	if o.Palette != nil {
		s.Palette = o.Palette
	}
	if o.LabelMap != nil {
		s.LabelMap = o.LabelMap
	}
	if o.IgnoreLabel != nil {
		s.IgnoreLabel = o.IgnoreLabel
	}
	if o.Output != nil {
		m := OutputSpec{}
		if s.Output != nil {
			m = *s.Output
		}
		if o.Output.Layout != "" {
			m.Layout = o.Output.Layout
		}
		if o.Output.Threshold != 0 {
			m.Threshold = o.Output.Threshold
		}
		s.Output = &m
	}
	return s
}

// Merge returns p overridden by the fields set (non-zero) in o. Related
// fields move together so an override never leaves a half-mixed setting:
// height and width are one group; mean, std and mean_std_range, and
// value_scale and value_offset, form the normalisation group, replaced
// whole when o sets any of them (so value_offset 0 can override -1);
// pad_color replaces when non-black.
func (p Preprocess) Merge(o Preprocess) Preprocess {
	if o.Height != 0 || o.Width != 0 {
		p.Height, p.Width = o.Height, o.Width
	}
	if o.Resize != "" {
		p.Resize = o.Resize
	}
	if o.ScaleFactor != 0 {
		p.ScaleFactor = o.ScaleFactor
	}
	if o.MultipleOf != 0 {
		p.MultipleOf = o.MultipleOf
	}
	if o.PlusOne {
		p.PlusOne = true
	}
	if o.PadColor != [3]uint8{} {
		p.PadColor = o.PadColor
	}
	if o.PadPosition != "" {
		p.PadPosition = o.PadPosition
	}
	if o.Interpolation != "" {
		p.Interpolation = o.Interpolation
	}
	if o.ChannelOrder != "" {
		p.ChannelOrder = o.ChannelOrder
	}
	if o.Layout != "" {
		p.Layout = o.Layout
	}
	if len(o.Mean) > 0 || len(o.Std) > 0 || o.MeanStdRange != "" || o.ValueScale != 0 || o.ValueOffset != 0 {
		p.Mean, p.Std, p.MeanStdRange = o.Mean, o.Std, o.MeanStdRange
		p.ValueScale, p.ValueOffset = o.ValueScale, o.ValueOffset
	}
	return p
}
