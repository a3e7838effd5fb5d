package onnx

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNotAModelIsNamedForWhatItIs: files that are no ONNX model, whatever
// they are called, are named by their content in Load's, Parse's and
// ReadMetadata's errors, with what to do; a broken ONNX file is not.
func TestNotAModelIsNamedForWhatItIs(t *testing.T) {
	st := make([]byte, 8, 64)
	binary.LittleEndian.PutUint64(st, 40)
	st = append(st, `{"conv.weight":{"dtype":"F32","shape":[1]}}`...)
	cases := []struct {
		name, content, says string
	}{
		{"page.onnx", "\n<!DOCTYPE html>\n<html><head><title>model.onnx</title>", "an HTML page"},
		{"lfs.onnx", "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n", "a Git LFS pointer"},
		{"model.onnx", "PK\x03\x04\x14\x00\x00\x00\x08\x00archive/data.pkl", "PyTorch checkpoint (torch.save)"},
		{"bundle.onnx", "PK\x03\x04\x14\x00\x00\x00\x08\x00model/readme.txt", "unpack it and give the .onnx file inside"},
		{"old.onnx", "\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.", "a Python pickle"},
		{"keras.onnx", "\x89HDF\r\n\x1a\n\x00\x00\x00", "an HDF5 file"},
		{"lite.onnx", "\x1c\x00\x00\x00TFL3\x00\x00", "TensorFlow Lite"},
		{"weights.onnx", string(st), "a safetensors file"},
		{"gz.onnx", "\x1f\x8b\x08\x00\x00\x00", "a gzip file"},
		{"ir.onnx", "<?xml version=\"1.0\"?>\n<net name=\"deeplab\" version=\"11\">", "an OpenVINO IR"},
		{"cfg.onnx", "{\"mean\": [0.5]}", "a JSON file"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		var fe *FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "it looks like "+c.says) && !strings.Contains(fe.LooksLike, c.says) {
			t.Errorf("Load(%s): %v, want it named as %q", c.name, err, c.says)
		}
		if _, err := Parse([]byte(c.content), ""); !errors.As(err, &fe) || !strings.Contains(fe.LooksLike, c.says) {
			t.Errorf("Parse(%s): %v, want it named as %q", c.name, err, c.says)
		}
		if _, _, err := ReadMetadata(path, "k", 100); err != nil && (!errors.As(err, &fe) || !strings.Contains(fe.LooksLike, c.says)) {
			t.Errorf("ReadMetadata(%s): %v, want it named as %q", c.name, err, c.says)
		}
	}
	// A real model cut short is a broken model, named as such, not
	// something else.
	m := NewModel(&GraphProto{}, 13)
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var fe *FormatError
	if _, err := Parse(data[:len(data)-1], ""); !errors.As(err, &fe) {
		t.Fatalf("a cut model: %v", err)
	}
	if fe.LooksLike != "" {
		t.Errorf("a cut model looks like %q", fe.LooksLike)
	}
}
