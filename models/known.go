package models

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models/synth"
)

// Entry describes a known pretrained model: what it is, how to feed it and
// where its file is. It is data; Sidecar turns it into the JSON segtune
// keeps next to a model.
type Entry struct {
	// Name identifies the model for Lookup (lower case, no spaces).
	Name        string
	Description string
	// Architecture names the network, e.g. "DeepLabV3+ (MobileNetV2)".
	Architecture string
	// Height and Width are the input size it was trained at; Dynamic says
	// whether its graph accepts other sizes.
	Height, Width int
	Dynamic       bool
	// Preprocess is how images become its input tensor.
	Preprocess imageio.Preprocess
	// Classes names its output channels, in order; Palette colours them.
	Classes []string
	Palette imageio.Palette
	// LabelMaps maps data sets (by name) to the label map that turns their
	// masks into Classes (imageio.ParseLabelMap syntax).
	LabelMaps map[string]string
	// File is the model's file name; Location says where to find it.
	File     string
	Location string
	// Embedded models are compiled into the segtune binary as well.
	Embedded bool
	// SHA256 is the hex SHA-256 of the model file and Bytes its size:
	// segtune recognises the model by them wherever the file lives
	// (Recognize; only files of a known size are hashed). Embedded models
	// leave both empty; theirs are those of the embedded bytes.
	SHA256 string
	Bytes  int64
}

// Sidecar returns the sidecar that describes the model's preprocessing,
// classes and palette (imageio.SidecarPath names its file).
func (e Entry) Sidecar() imageio.Sidecar {
	p := e.Preprocess
	return imageio.Sidecar{
		Version: imageio.SidecarVersion, Preprocess: &p,
		Classes: slices.Clone(e.Classes), Palette: slices.Clone(e.Palette),
	}
}

// Locate returns the path of the model's file in the first of dirs that
// holds it, or an error naming the folders searched and Location.
func (e Entry) Locate(dirs ...string) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, e.File)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("models: %s: %w", e.Name, err)
		}
	}
	return "", fmt.Errorf("models: %s: %s is not in %s (%s)", e.Name, e.File, strings.Join(dirs, ", "), e.Location)
}

// The person models' normalisation: RGB, x/127.5 − 1.
const (
	personValueScale  = 1 / 127.5
	personValueOffset = -1
)

// personPalette colours background black and person red.
var personPalette = imageio.Palette{{0, 0, 0, 255}, {192, 0, 0, 255}}

// CamVidPersonLabelMap turns CamVid's 12 labels into the person models'
// classes: Pedestrian and Bicyclist → person, Unlabelled → ignore (255),
// everything else → background.
const CamVidPersonLabelMap = "9,10:1;11:255;*:0"

// SynthName is the name of the small DeepLabV3+ trained on models/synth.
const SynthName = "segtune-synth"

// known is the registry; Known returns copies.
var known = []Entry{
	{
		Name: "deeplabv3plus-person-dynamic",
		Description: "DeepLabV3+ pretrained for person segmentation (COCO, Supervisely and MHP-v2 people; " +
			"the MIT-licensed mobile-deeplab-v3-plus release with its int8 weights turned back into float32), " +
			"2.25 M parameters, opset 15. Height and width are dynamic; DeepLab's 8k+1 sizes suit it, " +
			"and small people gain from upscaling (CamVid: person IoU 0.13 at 360×480, 0.53 at 721×961), so its " +
			"preprocessing doubles each image's size, rounded to 8k+1 (the resize setting none feeds images at their own size).",
		Architecture: "DeepLabV3+ (MobileNetV2, ASPP, decoder)",
		Height:       513, Width: 513, Dynamic: true,
		Preprocess: imageio.Preprocess{Resize: imageio.ResizeScale, ScaleFactor: 2, MultipleOf: 8, PlusOne: true,
			ValueScale: personValueScale, ValueOffset: personValueOffset},
		Classes: []string{"background", "person"}, Palette: personPalette,
		LabelMaps: map[string]string{"camvid": CamVidPersonLabelMap},
		File:      "deeplabv3plus_person_dynamic.onnx",
		SHA256:    "7a020690cbc3b5ccf1f95a3996e8c4e464f8a78fbe019a7ea8336c8a27deb7d1",
		Bytes:     9027645,
		Location:  "the project's shared assets, ../shared/assets/models ($SEGTUNE_SHARED_ASSETS/models)",
	},
	{
		Name: "deeplabv3plus-person-513",
		Description: "The same person DeepLabV3+ with a fixed 1×3×513×513 input (opset 13): " +
			"images are stretched to 513×513.",
		Architecture: "DeepLabV3+ (MobileNetV2, ASPP, decoder)",
		Height:       513, Width: 513,
		Preprocess: imageio.Preprocess{Height: 513, Width: 513, Resize: imageio.ResizeStretch, ValueScale: personValueScale, ValueOffset: personValueOffset},
		Classes:    []string{"background", "person"}, Palette: personPalette,
		LabelMaps: map[string]string{"camvid": CamVidPersonLabelMap},
		File:      "deeplabv3plus_person_513.onnx",
		SHA256:    "fcba9b5c22fdcad798dfa1bbbfb5bb720298665076ac2250d3472234c5f9651e",
		Bytes:     9026801,
		Location:  "the project's shared assets, ../shared/assets/models ($SEGTUNE_SHARED_ASSETS/models)",
	},
	{
		Name: SynthName,
		Description: "segtune's default model: the small DeepLabV3+ of DefaultDeepLabConfig (width 0.5, about 0.9 M " +
			"parameters) trained from scratch on the synthetic discs-and-squares set of models/synth " +
			"(synth.DefaultConfig), whose objects range from 0.05% to 25% of the image.",
		Architecture: "DeepLabV3+ (MobileNetV2 ×0.5, ASPP, decoder)",
		Height:       96, Width: 128, Dynamic: true,
		Preprocess: imageio.Preprocess{ValueScale: 1 / 127.5, ValueOffset: -1},
		Classes:    synth.ClassNames, Palette: synth.Palette,
		File:     "segtune-synth.onnx",
		Location: "embedded in the segtune binary",
		Embedded: true,
	},
}

// Known returns the registry of known pretrained models, in a fixed order.
// The entries are copies: changing them changes nothing here.
func Known() []Entry {
	out := make([]Entry, len(known))
	for i, e := range known {
		out[i] = e.clone()
	}
	return out
}

// Lookup returns the known model called name (case-insensitive).
func Lookup(name string) (Entry, error) {
	var names []string
	for _, e := range known {
		if strings.EqualFold(e.Name, strings.TrimSpace(name)) {
			return e.clone(), nil
		}
		names = append(names, e.Name)
	}
	return Entry{}, fmt.Errorf("models: no known model %q (known: %s)", name, strings.Join(names, ", "))
}

func (e Entry) clone() Entry {
	e.Classes = slices.Clone(e.Classes)
	e.Palette = slices.Clone(e.Palette)
	e.Preprocess.Mean = slices.Clone(e.Preprocess.Mean)
	e.Preprocess.Std = slices.Clone(e.Preprocess.Std)
	if e.LabelMaps != nil {
		m := make(map[string]string, len(e.LabelMaps))
		for k, v := range e.LabelMaps {
			m[k] = v
		}
		e.LabelMaps = m
	}
	return e
}
