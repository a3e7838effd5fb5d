package finetune

import (
	"encoding/json"
	"fmt"

	"github.com/segtune/segtune/finetune/export"
	"github.com/segtune/segtune/imageio"
)

// NetworkSpec is what it takes to rebuild a run's network from its base
// model (export.NetworkSpec).
type NetworkSpec = export.NetworkSpec

// BaseModelError is a checkpoint's base model that did not load
// (export.BaseModelError).
type BaseModelError = export.BaseModelError

// Export writes a checkpoint's inference model to out, atomically, with
// the settings of the run that made it (Config.Settings) in its
// metadata_props and in its sidecar, so that the model alone says how it
// is fed. A checkpoint without a configuration writes the model alone.
func Export(checkpointPath, baseOverride, out string) error {
	_, err := export.Export(checkpointPath, baseOverride, out, recordedSettings)
	return err
}

// recordedSettings are the settings (Config.Settings) of the run whose
// configuration a checkpoint records.
func recordedSettings(config json.RawMessage) (imageio.Sidecar, error) {
	var cfg Config
	if err := json.Unmarshal(config, &cfg); err != nil {
		return imageio.Sidecar{}, fmt.Errorf("config: %w", err)
	}
	return cfg.Settings()
}
