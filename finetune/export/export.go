// Package export rebuilds the inference model of a fine-tuning checkpoint:
// the base network as the run recorded it (NetworkSpec: its file, a new
// classifier, dequantized weights) with the trained weights written back,
// and writes it with the run's settings beside it.
package export

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/sizehead"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/dequantize"
)

// NetworkSpec is what it takes to rebuild a run's network from its base
// model: a checkpoint stores it (inside its config) so that export can write
// the trained weights back into a clean copy of the base graph.
type NetworkSpec struct {
	// BaseModel is the ONNX file the run started from.
	BaseModel string `json:"base_model" setting:"network.base_model"`
	// Classes, when > 0, replaced the final classifier by one with this
	// many outputs, initialised from HeadSeed.
	Classes  int    `json:"classes,omitempty" setting:"classes"`
	HeadSeed uint64 `json:"head_seed,omitempty" setting:"classes"`
	// Dequantize turned a quantized base model's integer weights into
	// float ones (onnx/dequantize) before training: the run trained, and
	// exports, the float form.
	Dequantize bool `json:"dequantize,omitempty" setting:"dequantize"`
}

// LoadNetwork loads the base model and applies the spec's structural
// changes (a new classifier). baseOverride, if set, replaces the recorded
// base model path (for checkpoints moved to another machine).
func (s NetworkSpec) LoadNetwork(baseOverride string) (*onnx.Model, error) {
	path := s.BaseModel
	if baseOverride != "" {
		path = baseOverride
	}
	m, err := onnx.Load(path)
	if err != nil {
		return nil, err
	}
	if s.Dequantize {
		if _, err := dequantize.Apply(m); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if s.Classes > 0 {
		if err := network.ReplaceClassifier(m, s.Classes, s.HeadSeed); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return m, nil
}

// checkpointConfig is the subset of a checkpoint's config export needs.
type checkpointConfig struct {
	Network NetworkSpec `json:"network"`
}

// checkpointNetwork reads the network a checkpoint's run trained, from its
// configuration; the base model is the one recorded in its header where the
// configuration names none.
func checkpointNetwork(config json.RawMessage, recordedBase string) (checkpointConfig, error) {
	var cfg checkpointConfig
	if len(config) > 0 {
		if err := json.Unmarshal(config, &cfg); err != nil {
			return cfg, fmt.Errorf("checkpoint config: %w", err)
		}
	}
	if cfg.Network.BaseModel == "" {
		cfg.Network.BaseModel = recordedBase
	}
	return cfg, nil
}

// CheckpointBase is the base model the checkpoint at path was trained
// from, as InferenceModel finds it, reading only the checkpoint's header
// ("" when it cannot be read).
func CheckpointBase(path string) string {
	info, err := checkpoint.ReadInfo(path)
	if err != nil {
		return ""
	}
	cfg, err := checkpointNetwork(info.Config, info.BaseModel)
	if err != nil {
		return ""
	}
	return cfg.Network.BaseModel
}

// BaseModelError is a checkpoint's base model that did not load (Err):
// the one the checkpoint records, or the one given in its place (Given).
type BaseModelError struct {
	Err   error
	Given bool
}

func (e *BaseModelError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *BaseModelError) Named(name func(key string) string) string {
	return fmt.Sprintf("%v (%s)", e.Err, e.which(name))
}

func (e *BaseModelError) Unwrap() error { return e.Err }

// which says which base model it was, and for the checkpoint's how to
// point at it.
func (e *BaseModelError) which(name func(key string) string) string {
	if e.Given {
		return setting.Sprintf(name, "the base model given with {network.base_model}")
	}
	return setting.Sprintf(name, "the base model of the checkpoint; pass {network.base_model} to point at it")
}

// InferenceModel rebuilds the clean inference model of a checkpoint: the
// base graph (with its new classifier, if the run made one) holding the
// trained weights, with the model's original inputs and outputs and nothing
// of the training graph.
func InferenceModel(ck *checkpoint.Checkpoint, baseOverride string) (*onnx.Model, error) {
	cfg, err := checkpointNetwork(ck.Config, ck.BaseModel)
	if err != nil {
		return nil, err
	}
	base := cfg.Network.BaseModel
	if baseOverride != "" {
		base = baseOverride
	}
	m, err := cfg.Network.LoadNetwork(baseOverride)
	if err != nil {
		return nil, &BaseModelError{Err: err, Given: baseOverride != ""}
	}
	if err := CheckBaseDigest(base, ck.BaseSHA256, "the checkpoint", Warnings); err != nil {
		return nil, err
	}
	var ws []network.Weight
	for _, t := range checkpoint.WithEMA(ck.Weights) { // a run with EMA exports the averages
		if strings.HasPrefix(t.Name, sizehead.Prefix) {
			continue // the size regularizer's head is not part of the network
		}
		ws = append(ws, network.Weight{Name: t.Name, Shape: t.Shape, Data: t.Data})
	}
	if err := network.SetWeights(m, ws); err != nil {
		return nil, fmt.Errorf("checkpoint weights do not fit %s: %w", base, err)
	}
	return m, nil
}

// Warnings receives the package's warnings that have no run log to go
// to (a checkpoint without a base-model digest); nil discards them.
var Warnings io.Writer = os.Stderr

// BaseDigestError refuses a base model, Path, whose SHA-256 (Got) is not
// the one the checkpoint Checkpoint records (Recorded): the file was
// replaced, or it is another model.
type BaseDigestError struct{ Path, Checkpoint, Got, Recorded string }

func (e *BaseDigestError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *BaseDigestError) Named(name func(key string) string) string {
	return setting.Sprintf(name, "%s is not the base model %s was trained from: its SHA-256 is %s, the checkpoint records %s (the file was replaced or {network.base_model} names another model)",
		e.Path, e.Checkpoint, e.Got[:min(12, len(e.Got))]+"…", e.Recorded[:min(12, len(e.Recorded))]+"…")
}

// CheckBaseDigest compares the base model at path with the digest a
// checkpoint recorded. A checkpoint from before digests were recorded
// (empty digest) is accepted with a warning on log.
func CheckBaseDigest(path, recorded, ckpt string, log io.Writer) error {
	if recorded == "" {
		if log != nil {
			fmt.Fprintf(log, "warning: %s records no SHA-256 of its base model; cannot check that %s is the model it was trained from\n", ckpt, path)
		}
		return nil
	}
	got, err := regfile.SHA256(path)
	if err != nil {
		return err
	}
	if got != recorded {
		return &BaseDigestError{Path: path, Checkpoint: filepath.Base(ckpt), Got: got, Recorded: recorded}
	}
	return nil
}

// Export writes a checkpoint's inference model to out, atomically, with
// the settings of the run that made it (settings reads them from the
// checkpoint's configuration) in its metadata_props and in its sidecar, so
// that the model alone says how it is fed. A checkpoint without a
// configuration writes the model alone.
func Export(checkpointPath, baseOverride, out string, settings func(config json.RawMessage) (imageio.Sidecar, error)) (*onnx.Model, error) {
	ck, err := checkpoint.Load(checkpointPath)
	if err != nil {
		return nil, err
	}
	m, err := InferenceModel(ck, baseOverride)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", checkpointPath, err)
	}
	var side *imageio.Sidecar
	if len(ck.Config) > 0 {
		s, err := settings(ck.Config)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", checkpointPath, err)
		}
		if err := models.EmbedSettings(m, s); err != nil {
			return nil, fmt.Errorf("%s: %w", out, err)
		}
		side = &s
	}
	if err := m.Save(out); err != nil {
		return nil, err
	}
	if side != nil {
		if err := side.Save(imageio.SidecarPath(out)); err != nil {
			return nil, err
		}
	}
	return m, nil
}
