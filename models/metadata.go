package models

import (
	"fmt"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/onnx"
)

// EmbedSettings writes s (preprocessing, classes, palette, label map,
// ignore label, output spec) into m's metadata_props under
// imageio.ContractKey, replacing what the model carried before.
func EmbedSettings(m *onnx.Model, s imageio.Sidecar) error {
	data, err := s.Compact()
	if err != nil {
		return fmt.Errorf("metadata_props %s: %w", imageio.ContractKey, err)
	}
	m.SetMetadata(imageio.ContractKey, string(data))
	return nil
}

// EmbeddedSettings returns the settings the model file at path carries in
// its metadata_props (found false when it carries none). A value that is
// not valid sidecar JSON (unknown fields and wrong types included), longer
// than imageio.MaxSidecarBytes or given twice is an error naming the model
// and the key.
func EmbeddedSettings(path string) (s *imageio.Sidecar, found bool, err error) {
	value, found, err := onnx.ReadMetadata(path, imageio.ContractKey, imageio.MaxSidecarBytes)
	if err != nil || !found {
		return nil, false, err
	}
	s, err = imageio.ParseSidecar([]byte(value), path+" metadata_props "+imageio.ContractKey)
	if err != nil {
		return nil, false, err
	}
	return s, true, nil
}
