package onnx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// withTensor returns tinyModel's bytes with initializer c replaced.
func withTensor(t testing.TB, c *onnxpb.TensorProto) []byte {
	m := tinyModel()
	m.Graph().Initializer[0] = c
	return marshal(t, m)
}

func hostileTensors() map[string]*onnxpb.TensorProto {
	f32 := int32(onnxpb.TensorProto_FLOAT)
	return map[string]*onnxpb.TensorProto{
		"huge dims":      {Name: str("c"), DataType: &f32, Dims: []int64{1e6, 1e6}, RawData: make([]byte, 4)},
		"huge typed":     {Name: str("c"), DataType: &f32, Dims: []int64{1e12}, FloatData: []float32{1}},
		"overflow dims":  {Name: str("c"), DataType: &f32, Dims: []int64{1 << 62, 1 << 62, 0}},
		"negative dims":  {Name: str("c"), DataType: &f32, Dims: []int64{-3}, RawData: make([]byte, 12)},
		"short raw":      {Name: str("c"), DataType: &f32, Dims: []int64{3}, RawData: make([]byte, 11)},
		"long raw":       {Name: str("c"), DataType: &f32, Dims: []int64{3}, RawData: make([]byte, 16)},
		"short typed":    {Name: str("c"), DataType: &f32, Dims: []int64{3}, FloatData: []float32{1, 2}},
		"unknown type":   {Name: str("c"), DataType: i32(99), Dims: []int64{3}, RawData: make([]byte, 12)},
		"undefined type": {Name: str("c"), Dims: []int64{3}},
		"string raw": {Name: str("c"), DataType: i32(int32(onnxpb.TensorProto_STRING)), Dims: []int64{1},
			RawData: []byte("x")},
	}
}

func TestParseRejectsHostileTensors(t *testing.T) {
	for name, tensor := range hostileTensors() {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(withTensor(t, tensor), "")
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), `"c"`) {
				t.Errorf("error does not name the tensor: %v", err)
			}
		})
	}
}

// Constant-node attributes and sparse initializers are checked as strictly
// as initializers.
func TestParseChecksAttributeAndSparseTensors(t *testing.T) {
	bad := hostileTensors()["short raw"]
	m := tinyModel()
	m.Graph().Node = append(m.Graph().Node, &onnxpb.NodeProto{OpType: str("Constant"), Output: []string{"k"},
		Attribute: []*onnxpb.AttributeProto{{Name: str("value"), T: bad}}})
	if _, err := Parse(marshal(t, m), ""); err == nil {
		t.Error("bad Constant value accepted")
	}
	m = tinyModel()
	m.Graph().SparseInitializer = []*onnxpb.SparseTensorProto{{Values: bad, Dims: []int64{10}}}
	if _, err := Parse(marshal(t, m), ""); err == nil {
		t.Error("bad sparse initializer accepted")
	}
}

func TestLoadRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	good := marshal(t, tinyModel())
	notModel, _ := proto.Marshal(NewFloat32Tensor("t", []int64{2}, []float32{1, 2}))
	files := map[string][]byte{
		"empty.onnx":     {},
		"truncated.onnx": good[:len(good)/2],
		"garbage.onnx":   []byte("\xff\xff\xff\xff this is not a protobuf"),
		"tensor.onnx":    notModel, // a valid protobuf, but not a model
		"text.onnx":      []byte("ir_version: 8\ngraph { }\n"),
	}
	for name, data := range files {
		writeFile(t, filepath.Join(dir, name), data)
	}
	os.Mkdir(filepath.Join(dir, "folder.onnx"), 0o755)
	paths := []string{filepath.Join(dir, "folder.onnx"), filepath.Join(dir, "missing.onnx")}
	for name := range files {
		paths = append(paths, filepath.Join(dir, name))
	}
	if st, err := os.Stat("/dev/zero"); err == nil && !st.Mode().IsRegular() {
		paths = append(paths, "/dev/zero") // would otherwise stream 2 GiB into memory
	}
	for _, p := range paths {
		m, err := Load(p)
		if err == nil {
			t.Errorf("%s: loaded %v", p, m.Proto)
			continue
		}
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error does not name the file: %v", p, err)
		}
		// What was read but is no model is a FormatError; what could not
		// be read as a file is not.
		var fe *FormatError
		_, read := files[filepath.Base(p)]
		if isFormat := errors.As(err, &fe); isFormat != read || (isFormat && fe.Path != p) {
			t.Errorf("%s: FormatError %v (path %q), want %v: %v", p, isFormat, pathOf(fe), read, err)
		}
	}
	var fe *FormatError
	if _, err := Parse([]byte("garbage"), ""); !errors.As(err, &fe) || fe.Path != "" {
		t.Errorf("Parse of garbage: %v, want a FormatError without a path", err)
	}
}

func pathOf(fe *FormatError) string {
	if fe == nil {
		return ""
	}
	return fe.Path
}

// Every prefix of a model either parses or fails cleanly.
func TestParseTruncations(t *testing.T) {
	good := marshal(t, ifModel())
	for n := range len(good) {
		Parse(good[:n], "") // must not panic
	}
	if _, err := Parse(good[:len(good)-1], ""); err == nil {
		t.Error("model missing its last byte parsed")
	}
}

func TestSaveErrorNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no", "such", "dir", "m.onnx")
	err := tinyModel().Save(p)
	if err == nil || !strings.Contains(err.Error(), "writing "+p) {
		t.Errorf("save into a missing folder: %v", err)
	}
}
