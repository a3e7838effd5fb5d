package resolve

import (
	"fmt"
	"io"
	"strings"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
)

// Settings are the settings a model runs with, and what they were merged
// from.
type Settings struct {
	imageio.Sidecar
	// Checkpoint reports that the path held a checkpoint, whose run's
	// settings take the place of a model file's layers.
	Checkpoint bool
	// Layers are a model file's own settings, lowest precedence first
	// (see Layers).
	Layers []Layer
	// MetadataErr is a model file's embedded settings, unusable and
	// left out (Layers' metaErr), for the caller to report.
	MetadataErr error
}

// ModelSettings returns the settings to run the model or checkpoint at
// path with. They merge, field by field and in increasing precedence: a
// checkpoint's run's settings, or else the model file's layers
// (registry, metadata_props, sidecar); the settings file named by file,
// when it is not ""; override, the caller's own. The merged preprocessing
// is validated.
func ModelSettings(path, file string, override imageio.Sidecar) (Settings, error) {
	var s Settings
	var err error
	if s.Checkpoint = IsCheckpoint(path); s.Checkpoint {
		ck, err := checkpoint.Load(path)
		if err != nil {
			return s, err
		}
		side, err := checkpointSettings(ck, path)
		if err != nil {
			return s, err
		}
		s.Sidecar = *side
	} else {
		if s.Layers, s.MetadataErr, err = Layers(path); err != nil {
			return s, err
		}
		s.Sidecar = Merge(s.Layers)
	}
	if file != "" {
		side, err := imageio.LoadSidecar(file)
		if err != nil {
			return s, err
		}
		s.Sidecar = s.Sidecar.Merge(*side)
	}
	s.Sidecar = s.Sidecar.Merge(override)
	if s.Preprocess != nil {
		err = s.Preprocess.Validate()
	}
	return s, err
}

// Notices say where s, the settings of the model at modelPath, come
// from: one per layer (with its notes), or, for a model with none run
// without settings of the user's (given false), the defaults assumed.
// They name settings by key ({label_map}, {mean}…), for the caller to
// call them as the user does (setting.Rename).
func (s Settings) Notices(modelPath string, given bool) []error {
	var out []error
	for _, l := range s.Layers {
		if l.Known != nil && l.Known.LabelMaps["camvid"] != "" {
			out = append(out, setting.Messagef("%s (CamVid masks: {label_map} '%s')", l.Notice(modelPath), l.Known.LabelMaps["camvid"]))
		} else {
			out = append(out, setting.Messagef("%s", l.Notice(modelPath)))
		}
		for _, n := range l.Notes {
			out = append(out, setting.Messagef("note: %s (a sidecar, {preprocess} or flags can set it)", n))
		}
	}
	if len(s.Layers) == 0 && !s.Checkpoint && !given {
		out = append(out, setting.Messagef("%s is not a known model and has no sidecar nor embedded settings (metadata_props %s): assuming RGB, raw 0..255 values, "+
			"the layout its graph shows (`segtune info`), at the model's fixed input size or else each image's own; "+
			"set {value_scale}/{value_offset} or {mean}/{std} (and {size}, {scale}, {bgr}, {nhwc}), {preprocess} FILE, or write %s",
			modelPath, imageio.ContractKey, imageio.SidecarPath(modelPath)))
	}
	return out
}

// MetadataWarning is the warning that a model's embedded settings, err,
// are unusable and ignored.
func MetadataWarning(err error) string {
	return fmt.Sprintf("warning: %v; ignoring the model's embedded settings (a sidecar or flags set them; "+
		"`segtune export` writes them anew)", err)
}

// WriteNotices writes on w, a line each led by prefix, where s, the
// settings of the model at modelPath, come from (Notices, their settings
// called name(key)); and on warn, wherever w goes, that the model's
// embedded settings are unusable.
func (s Settings) WriteNotices(w, warn io.Writer, prefix, modelPath string, given bool, name func(key string) string) {
	if s.MetadataErr != nil {
		fmt.Fprintln(warn, prefix+MetadataWarning(s.MetadataErr))
	}
	for _, n := range s.Notices(modelPath, given) {
		fmt.Fprintln(w, prefix+setting.Rename(n, name).Error())
	}
}

// PreprocessSource names where the preprocessing comes from: given, the
// caller's settings that override it (as the caller names them), over the
// highest of the layers that has any; without given, a model that scales
// its images adds how to train at their own scale ({scale_factor}, named
// by name).
func (s Settings) PreprocessSource(given []string, name func(key string) string) string {
	from := "segtune's defaults: the model brings no preprocessing"
	for i := len(s.Layers) - 1; i >= 0; i-- {
		if s.Layers[i].Settings.Preprocess != nil {
			from = "from " + s.Layers[i].From
			break
		}
	}
	if len(given) > 0 {
		return strings.Join(given, ", ") + " over " + strings.TrimPrefix(from, "from ")
	}
	if p := s.Preprocess; p != nil && p.Resize == imageio.ResizeScale && p.ScaleFactor != 1 {
		return from + setting.Sprintf(name, "; {scale_factor} 1 trains at the images' own scale")
	}
	return from
}
