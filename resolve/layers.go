package resolve

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/onnx"
)

// Layer is one source of a model's settings: what it says and where it
// was read.
type Layer struct {
	From     string
	Settings imageio.Sidecar
	// Known is the registry's entry, for the registry's layer.
	Known *models.Entry
	// Notes say what a Hub repository's files lacked or got wrong.
	Notes []string
}

// Notice says, in one line for a log, where the settings of the model at
// modelPath come from.
func (l Layer) Notice(modelPath string) string {
	switch {
	case l.Known != nil:
		return fmt.Sprintf("%s is %s (recognised by its SHA-256): using its preprocessing, classes and palette", modelPath, l.Known.Name)
	case l.From == MetadataLayer:
		return fmt.Sprintf("using the settings %s carries (%s)", modelPath, l.From)
	}
	return "using settings from " + l.From
}

// MetadataLayer names the settings a model file carries in itself.
const MetadataLayer = "metadata_props " + imageio.ContractKey

// Layers reads the settings a model file brings with it, lowest
// precedence first: the registry's, when the file's SHA-256 is a known
// model's (wherever it lives and whatever it is called); for a model
// downloaded from the Hub, its repository's (hubLayer); those the file
// carries in its metadata_props (imageio.ContractKey); its sidecar
// MODEL.segtune.json. Unusable metadata is not a layer: it comes back as
// metaErr for the caller to report, so that the sidecar, flags or a new
// export can still take its place. A missing file, or one that is not a
// regular file, has no layers (opening the model reports it); a file that
// is no ONNX protobuf at all is an error (an *onnx.FormatError), since no
// setting makes it a model.
func Layers(modelPath string) (layers []Layer, metaErr error, err error) {
	e, known, err := models.Recognize(modelPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	if known {
		layers = append(layers, Layer{From: "registry (" + e.Name + ")", Settings: e.Sidecar(), Known: &e})
	}
	if l := hubLayer(modelPath); l != nil {
		layers = append(layers, *l)
	}
	meta, found, err := models.EmbeddedSettings(modelPath)
	var notONNX *onnx.FormatError
	switch {
	case errors.As(err, &notONNX):
		return nil, nil, err
	case found:
		layers = append(layers, Layer{From: MetadataLayer, Settings: *meta})
	case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, regfile.ErrNotRegular):
		metaErr = err
	}
	side, found, err := imageio.LoadModelSidecar(modelPath)
	if err != nil {
		return nil, nil, err
	}
	if found {
		layers = append(layers, Layer{From: imageio.SidecarPath(modelPath), Settings: *side})
	}
	return layers, metaErr, nil
}

// Merge merges settings layers, later ones taking precedence.
func Merge(layers []Layer) imageio.Sidecar {
	s := imageio.Sidecar{Version: imageio.SidecarVersion}
	for _, l := range layers {
		s = s.Merge(l.Settings)
	}
	return s
}

// Origins names, for each part of the merged settings, the layer it comes
// from (the last that sets it); a part no layer sets is absent.
func Origins(layers []Layer) map[string]string {
	out := map[string]string{}
	for _, l := range layers {
		s := l.Settings
		for part, set := range map[string]bool{
			"preprocess": s.Preprocess != nil, "classes": s.Classes != nil, "palette": s.Palette != nil,
			"label_map": s.LabelMap != nil, "ignore_label": s.IgnoreLabel != nil, "output": s.Output != nil,
		} {
			if set {
				out[part] = l.From
			}
		}
	}
	return out
}
