package resolve

import (
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/imageio"
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
