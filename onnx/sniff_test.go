package onnx

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
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
		{"model.keras", "PK\x03\x04\x14\x00\x00\x00\x08\x00metadata.json", "a Keras 3 model (.keras)"},
		{"exported.zip", "PK\x03\x04\x14\x00\x00\x00\x08\x00m/saved_model.pb", "a zip archive of a TensorFlow SavedModel"},
		{"w.npy", "\x93NUMPY\x01\x00v\x00{'descr': '<f4'", "a NumPy array"},
		{"frozen.pb", string(graphDef()), "a TensorFlow graph (a frozen .pb GraphDef)"},
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
	// A SavedModel's graph can parse as a model without a graph: its name
	// says what it is. Its folder, given as the model, is named too, as is
	// a folder holding ONNX files.
	saved := filepath.Join(dir, "sm", "saved_model.pb")
	if err := os.MkdirAll(filepath.Dir(saved), 0o755); err != nil {
		t.Fatal(err)
	}
	sm := protowire.AppendTag(nil, 1, protowire.VarintType)
	sm = protowire.AppendVarint(sm, 1)
	sm = protowire.AppendTag(sm, 2, protowire.BytesType)
	sm = protowire.AppendBytes(sm, []byte("\x0a\x02\x0a\x00\x12\x06\x0a\x04Const"))
	if err := os.WriteFile(saved, sm, 0o644); err != nil {
		t.Fatal(err)
	}
	var fe *FormatError
	if _, err := Load(saved); !errors.As(err, &fe) || !strings.Contains(err.Error(), "it looks like the graph of a TensorFlow SavedModel") {
		t.Errorf("Load(saved_model.pb): %v", err)
	}
	if _, err := Load(filepath.Dir(saved)); err == nil || !strings.Contains(err.Error(), "a TensorFlow SavedModel folder: convert it with tf2onnx") {
		t.Errorf("Load(a SavedModel folder): %v", err)
	}
	onnxDir := filepath.Join(dir, "release")
	if err := os.MkdirAll(onnxDir, 0o755); err != nil || tinyModel().Save(filepath.Join(onnxDir, "seg.onnx")) != nil {
		t.Fatal(err)
	}
	if _, err := Load(onnxDir); err == nil || !strings.Contains(err.Error(), "it holds seg.onnx: give the model file itself") {
		t.Errorf("Load(a folder of ONNX files): %v", err)
	}
	// A real model cut short is a broken model, named as such, not
	// something else.
	m := NewModel(&GraphProto{}, 13)
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(data[:len(data)-1], ""); !errors.As(err, &fe) {
		t.Fatalf("a cut model: %v", err)
	}
	if fe.LooksLike != "" {
		t.Errorf("a cut model looks like %q", fe.LooksLike)
	}
}

// graphDef is the start of a TensorFlow GraphDef: a Placeholder node and
// a Conv2D node, as tf.io.write_graph writes them.
func graphDef() []byte {
	nodeDef := func(name, op string) []byte {
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		b = protowire.AppendString(b, name)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, op)
		b = protowire.AppendTag(b, 5, protowire.BytesType) // attr
		return protowire.AppendBytes(b, []byte("\x0a\x05dtype\x12\x02\x30\x01"))
	}
	var g []byte
	for _, n := range [][2]string{{"input_1", "Placeholder"}, {"conv2d/Conv2D", "Conv2D"}} {
		g = protowire.AppendTag(g, 1, protowire.BytesType)
		g = protowire.AppendBytes(g, nodeDef(n[0], n[1]))
	}
	return g
}
