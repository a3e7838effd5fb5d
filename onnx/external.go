package onnx

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// LoadExternalData reads every initializer stored outside the model file into
// its raw_data, so that the model becomes self-contained. Locations must be
// relative paths inside the model's folder: absolute paths, paths that climb
// out with "..", and symbolic links that lead outside are rejected, because a
// downloaded model must not be able to read arbitrary files.
//
// Every tensor must occupy its own bytes of the data file: the total read from
// a file may not exceed its size, so that a small model cannot point thousands
// of tensors at the same region and make Load allocate without bound.
func (m *Model) LoadExternalData() error {
	used := map[string]int64{} // bytes read so far, by resolved file
	for _, t := range m.allTensors() {
		if t.GetDataLocation() != onnxpb.TensorProto_EXTERNAL {
			continue
		}
		if err := m.loadExternalTensor(t, used); err != nil {
			return fmt.Errorf("initializer %q: %w", t.GetName(), err)
		}
	}
	return nil
}

func (m *Model) loadExternalTensor(t *onnxpb.TensorProto, used map[string]int64) error {
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
	want, ok := rawBytes(t.GetDataType(), n)
	if !ok {
		return fmt.Errorf("external data of type %v is not supported", onnxpb.TensorProto_DataType(t.GetDataType()))
	}
	if length < -1 {
		return fmt.Errorf("negative external data length %d", length)
	}
	if length >= 0 && length != want {
		return fmt.Errorf("external data length %d does not match dims %v (%d bytes)", length, t.GetDims(), want)
	}
	if offset < 0 {
		return fmt.Errorf("negative external data offset %d", offset)
	}
	f, st, err := regfile.Open(path)
	if err != nil {
		if errors.Is(err, regfile.ErrNotRegular) {
			return fmt.Errorf("external data %s is not a regular file: %w", location, err)
		}
		return fmt.Errorf("external data: %w", err)
	}
	defer f.Close()
	// Written as a subtraction so a huge offset cannot overflow past the check.
	if want > st.Size() || offset > st.Size()-want {
		return fmt.Errorf("external data %s holds %d bytes, tensor needs %d at offset %d", location, st.Size(), want, offset)
	}
	if used[path] > st.Size()-want {
		return fmt.Errorf("external data %s: tensors claim more than its %d bytes (overlapping regions)", location, st.Size())
	}
	used[path] += want
	raw := make([]byte, want)
	if n, err := f.ReadAt(raw, offset); n != len(raw) {
		return fmt.Errorf("external data %s: read %d of %d bytes: %w", location, n, want, err)
	}
	t.RawData = raw
	// Cleared rather than set to DEFAULT, so a model saved with external data
	// loads back equal (proto.Equal) to the one it was saved from.
	t.ExternalData, t.DataLocation = nil, nil
	return nil
}

// ExternalLocations returns the external-data files (as written in the
// model: paths relative to its folder) that the serialized model data
// refers to, each once, in the order first met; it parses nothing else and
// reads no file, so that a model fetched from object storage can have its
// data files fetched beside it before Load.
func ExternalLocations(data []byte) ([]string, error) {
	pb := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(data, pb); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotProtobuf, err)
	}
	m := &Model{Proto: pb}
	var out []string
	seen := map[string]bool{}
	for _, t := range m.allTensors() {
		if t.GetDataLocation() != onnxpb.TensorProto_EXTERNAL {
			continue
		}
		for _, kv := range t.GetExternalData() {
			if kv.GetKey() == "location" && !seen[kv.GetValue()] {
				seen[kv.GetValue()] = true
				out = append(out, kv.GetValue())
			}
		}
	}
	return out, nil
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

// allTensors lists the initializers (dense and sparse) of the main graph, of
// every subgraph and of the training-info graphs, and the tensors held in node
// attributes, including those of model-local functions.
func (m *Model) allTensors() []*onnxpb.TensorProto {
	var out []*onnxpb.TensorProto
	sparse := func(sp *onnxpb.SparseTensorProto) {
		if v := sp.GetValues(); v != nil {
			out = append(out, v)
		}
		if ix := sp.GetIndices(); ix != nil {
			out = append(out, ix)
		}
	}
	var walk func(g *onnxpb.GraphProto)
	nodes := func(ns []*onnxpb.NodeProto) {
		for _, n := range ns {
			for _, a := range n.GetAttribute() {
				if a.GetT() != nil {
					out = append(out, a.GetT())
				}
				out = append(out, a.GetTensors()...)
				if a.GetSparseTensor() != nil {
					sparse(a.GetSparseTensor())
				}
				for _, sp := range a.GetSparseTensors() {
					sparse(sp)
				}
				walk(a.GetG())
				for _, sg := range a.GetGraphs() {
					walk(sg)
				}
			}
		}
	}
	walk = func(g *onnxpb.GraphProto) {
		if g == nil {
			return
		}
		out = append(out, g.GetInitializer()...)
		for _, sp := range g.GetSparseInitializer() {
			sparse(sp)
		}
		nodes(g.GetNode())
	}
	walk(m.Proto.GetGraph())
	for _, ti := range m.Proto.GetTrainingInfo() {
		walk(ti.GetInitialization())
		walk(ti.GetAlgorithm())
	}
	for _, f := range m.Proto.GetFunctions() {
		nodes(f.GetNode())
	}
	return out
}
