package onnx

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// LoadExternalData reads every initializer stored outside the model file into
// its raw_data, so that the model becomes self-contained. Locations must be
// relative paths inside the model's folder: absolute paths, paths that climb
// out with "..", and symbolic links that lead outside are rejected, because a
// downloaded model must not be able to read arbitrary files.
func (m *Model) LoadExternalData() error {
	for _, t := range m.allTensors() {
		if t.GetDataLocation() != onnxpb.TensorProto_EXTERNAL {
			continue
		}
		if err := m.loadExternalTensor(t); err != nil {
			return fmt.Errorf("initializer %q: %w", t.GetName(), err)
		}
	}
	return nil
}

func (m *Model) loadExternalTensor(t *onnxpb.TensorProto) error {
	var location string
	var offset, length int64 = 0, -1
	for _, kv := range t.GetExternalData() {
		var err error
		switch kv.GetKey() {
		case "location":
			location = kv.GetValue()
		case "offset":
			offset, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "length":
			length, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		}
		if err != nil {
			return fmt.Errorf("external data %s=%q: %w", kv.GetKey(), kv.GetValue(), err)
		}
	}
	path, err := m.resolveExternalPath(location)
	if err != nil {
		return err
	}
	n, err := NumElements(t.GetDims())
	if err != nil {
		return err
	}
	size := int64(ElemSize(t.GetDataType()))
	if size == 0 {
		return fmt.Errorf("external data of type %v is not supported", onnxpb.TensorProto_DataType(t.GetDataType()))
	}
	want := n * size
	if length >= 0 && length != want {
		return fmt.Errorf("external data length %d does not match dims %v (%d bytes)", length, t.GetDims(), want)
	}
	if offset < 0 {
		return fmt.Errorf("negative external data offset %d", offset)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("external data: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("external data: %w", err)
	}
	if offset+want > st.Size() {
		return fmt.Errorf("external data %s holds %d bytes, tensor needs %d at offset %d", location, st.Size(), want, offset)
	}
	raw := make([]byte, want)
	if _, err := f.ReadAt(raw, offset); err != nil && err != io.EOF {
		return fmt.Errorf("external data %s: %w", location, err)
	}
	t.RawData = raw
	t.ExternalData = nil
	loc := onnxpb.TensorProto_DEFAULT
	t.DataLocation = &loc
	return nil
}

// resolveExternalPath maps an external-data location to a file inside m.Dir.
func (m *Model) resolveExternalPath(location string) (string, error) {
	if location == "" {
		return "", fmt.Errorf("external data without a location")
	}
	if m.Dir == "" {
		return "", fmt.Errorf("external data %q, but the model was not loaded from a folder", location)
	}
	if filepath.IsAbs(location) || strings.HasPrefix(location, "/") || strings.HasPrefix(location, `\`) {
		return "", fmt.Errorf("external data path %q is absolute; only paths inside the model's folder are allowed", location)
	}
	clean := filepath.Clean(filepath.FromSlash(location))
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("external data path %q leaves the model's folder", location)
	}
	root, err := filepath.EvalSymlinks(m.Dir)
	if err != nil {
		return "", fmt.Errorf("model folder: %w", err)
	}
	full, err := filepath.EvalSymlinks(filepath.Join(root, clean))
	if err != nil {
		return "", fmt.Errorf("external data %q: %w", location, err)
	}
	rel, err := filepath.Rel(root, full)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("external data path %q leads outside the model's folder (through a symbolic link)", location)
	}
	return full, nil
}

// allTensors lists the initializers of the main graph and of every subgraph
// and the tensors held in Constant-node attributes.
func (m *Model) allTensors() []*onnxpb.TensorProto {
	var out []*onnxpb.TensorProto
	var walk func(g *onnxpb.GraphProto)
	walk = func(g *onnxpb.GraphProto) {
		if g == nil {
			return
		}
		out = append(out, g.GetInitializer()...)
		for _, n := range g.GetNode() {
			for _, a := range n.GetAttribute() {
				if a.GetT() != nil {
					out = append(out, a.GetT())
				}
				out = append(out, a.GetTensors()...)
				walk(a.GetG())
				for _, sg := range a.GetGraphs() {
					walk(sg)
				}
			}
		}
	}
	walk(m.Proto.GetGraph())
	return out
}
