package resolve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/export"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/onnx"
)

// IsCheckpoint reports whether path holds a segtune checkpoint rather
// than an ONNX model, by its magic bytes.
func IsCheckpoint(path string) bool {
	f, _, err := regfile.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 8)
	if _, err := io.ReadFull(f, head); err != nil {
		return false
	}
	return bytes.Equal(head, []byte("SEGTCKPT"))
}

// Load loads an ONNX model, or a checkpoint's inference model together
// with the settings its run used (preprocessing, label map, classes).
func Load(path string) (*onnx.Model, *imageio.Sidecar, error) {
	if !IsCheckpoint(path) {
		m, err := onnx.Load(path)
		return m, nil, err
	}
	return LoadCheckpoint(path, "")
}

// LoadCheckpoint returns a checkpoint's inference model, built on base
// when set (else on the base model the checkpoint records), and the
// settings of the run that made it.
func LoadCheckpoint(path, base string) (*onnx.Model, *imageio.Sidecar, error) {
	ck, err := checkpoint.Load(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := export.InferenceModel(ck, base)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	side, err := checkpointSettings(ck, path)
	if err != nil {
		return nil, nil, err
	}
	return m, side, nil
}

// checkpointSettings returns the settings (preprocessing, label map,
// classes) of the run that made a checkpoint read from path.
func checkpointSettings(ck *checkpoint.Checkpoint, path string) (*imageio.Sidecar, error) {
	var cfg finetune.Config
	if err := json.Unmarshal(ck.Config, &cfg); err != nil {
		return nil, fmt.Errorf("%s: config: %w", path, err)
	}
	side, err := cfg.Settings()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &side, nil
}

// CheckpointSizeThreshold returns the size threshold a checkpoint's run
// fitted on its training set, or 0.
func CheckpointSizeThreshold(path string) float64 {
	ck, err := checkpoint.Load(path)
	if err != nil {
		return 0
	}
	var cfg finetune.Config
	if json.Unmarshal(ck.Config, &cfg) != nil {
		return 0
	}
	return cfg.Size.Threshold
}
