package onnx

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// externalise moves initializer name of m to location at offset, leaving the
// bytes to be written by the caller, and returns them.
func externalise(t *testing.T, m *Model, name, location string, offset int) []byte {
	t.Helper()
	tensor := m.Initializer(name)
	raw := tensor.RawData
	tensor.RawData = nil
	tensor.DataLocation = onnxpb.TensorProto_EXTERNAL.Enum()
	tensor.ExternalData = []*onnxpb.StringStringEntryProto{
		entry("location", location),
		entry("offset", strconv.Itoa(offset)),
		entry("length", strconv.Itoa(len(raw))),
	}
	return raw
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadExternalData(t *testing.T) {
	want := tinyModel()
	m := want.Clone()
	dir := t.TempDir()
	c := externalise(t, m, "c", "weights/data.bin", 16)
	w := externalise(t, m, "w", "weights/data.bin", 16+len(c))
	writeFile(t, filepath.Join(dir, "weights", "data.bin"), append(append(make([]byte, 16), c...), w...))
	path := filepath.Join(dir, "model.onnx")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.Proto, want.Proto) {
		t.Error("model with external data does not load equal to the inline original")
	}
}

func TestSaveWithExternalData(t *testing.T) {
	m := tinyModel()
	m.Graph().Initializer = append(m.Graph().Initializer, NewFloat32Tensor("small", []int64{1}, []float32{1}))
	orig := m.Clone()
	path := filepath.Join(t.TempDir(), "model.onnx")
	if err := m.SaveWithExternalData(path, 12); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(m.Proto, orig.Proto) {
		t.Error("SaveWithExternalData changed the model in memory")
	}
	data, err := os.ReadFile(path + ".data")
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 24 { // c and w, 3 float32 each; "small" stays inline
		t.Errorf("data file holds %d bytes, want 24", len(data))
	}
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(onDisk, "")
	if err == nil || !strings.Contains(err.Error(), "not loaded from a folder") {
		t.Errorf("Parse without a folder: err = %v", err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.Proto, orig.Proto) {
		t.Error("model saved with external data does not load back equal")
	}
}

func TestExternalDataRejected(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.bin")
	writeFile(t, outside, make([]byte, 64))
	cases := []struct {
		name     string
		location string
		offset   int
		setup    func(t *testing.T, dir string)
		tweak    func(tensor *onnxpb.TensorProto)
		wantErr  string
	}{
		{name: "absolute", location: outside, wantErr: "absolute"},
		{name: "dotdot", location: "../secret.bin", wantErr: "leaves the model's folder"},
		{name: "dotdot inside", location: "sub/../../secret.bin", wantErr: "leaves the model's folder"},
		{name: "symlink outside", location: "link.bin", wantErr: "symbolic link",
			setup: func(t *testing.T, dir string) {
				if err := os.Symlink(outside, filepath.Join(dir, "link.bin")); err != nil {
					t.Skip("no symlinks:", err)
				}
			}},
		{name: "symlinked folder outside", location: "sub/secret.bin", wantErr: "symbolic link",
			setup: func(t *testing.T, dir string) {
				if err := os.Symlink(filepath.Dir(outside), filepath.Join(dir, "sub")); err != nil {
					t.Skip("no symlinks:", err)
				}
			}},
		{name: "missing", location: "nope.bin", wantErr: "nope.bin"},
		{name: "folder", location: "sub", wantErr: "not a regular file",
			setup: func(t *testing.T, dir string) { os.Mkdir(filepath.Join(dir, "sub"), 0o755) }},
		{name: "no location", location: "", wantErr: "without a location"},
		{name: "offset past end", location: "data.bin", offset: 60, wantErr: "holds 64 bytes"},
		{name: "huge offset", location: "data.bin", offset: 1<<63 - 1, wantErr: "holds 64 bytes"},
		{name: "negative offset", location: "data.bin", offset: -4, wantErr: "negative"},
		{name: "length mismatch", location: "data.bin", wantErr: "does not match",
			tweak: func(tensor *onnxpb.TensorProto) { tensor.ExternalData[2].Value = str("8") }},
		{name: "bad number", location: "data.bin", wantErr: "length",
			tweak: func(tensor *onnxpb.TensorProto) { tensor.ExternalData[2].Value = str("12x") }},
		{name: "huge dims", location: "data.bin", wantErr: "more than",
			tweak: func(tensor *onnxpb.TensorProto) { tensor.Dims = []int64{1 << 40} }},
		{name: "overlapping tensors", location: "data.bin", wantErr: "overlapping",
			tweak: func(tensor *onnxpb.TensorProto) { tensor.Dims = []int64{12} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "data.bin"), make([]byte, 64))
			if c.setup != nil {
				c.setup(t, dir)
			}
			m := tinyModel()
			externalise(t, m, "c", c.location, c.offset)
			if c.name == "overlapping tensors" {
				// Two tensors of 48 bytes each in a 64-byte file.
				externalise(t, m, "w", c.location, 0)
				m.Initializer("w").Dims = []int64{12}
				m.Initializer("w").ExternalData[2].Value = str("48")
				m.Initializer("c").ExternalData[2].Value = str("48")
			}
			if c.tweak != nil {
				c.tweak(m.Initializer("c"))
			}
			path := filepath.Join(dir, "model.onnx")
			if err := m.Save(path); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil {
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v\nwant it to name %s and say %q", err, path, c.wantErr)
			}
		})
	}
}

func TestExternalSymlinkInsideFolderAllowed(t *testing.T) {
	dir := t.TempDir()
	m := tinyModel()
	raw := externalise(t, m, "c", "link.bin", 0)
	writeFile(t, filepath.Join(dir, "real", "data.bin"), raw)
	if err := os.Symlink(filepath.Join("real", "data.bin"), filepath.Join(dir, "link.bin")); err != nil {
		t.Skip("no symlinks:", err)
	}
	path := filepath.Join(dir, "model.onnx")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
}

func TestExternalLocations(t *testing.T) {
	m := tinyModel()
	externalise(t, m, "c", "weights/data.bin", 0)
	externalise(t, m, "w", "weights/data.bin", 64)
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ExternalLocations(data)
	if err != nil || len(got) != 1 || got[0] != "weights/data.bin" {
		t.Errorf("ExternalLocations = %v, %v; want [weights/data.bin]", got, err)
	}
	inline, _ := tinyModel().Marshal()
	if got, err := ExternalLocations(inline); err != nil || len(got) != 0 {
		t.Errorf("inline model: %v, %v", got, err)
	}
	if _, err := ExternalLocations([]byte("not a model \xff\xff")); err == nil {
		t.Error("garbage accepted")
	}
}
