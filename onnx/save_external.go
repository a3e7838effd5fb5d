package onnx

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// SaveWithExternalData writes the model to path with every initializer whose
// raw_data holds at least threshold bytes moved to a data file beside it,
// named after path with ".data" appended, as ONNX Runtime and the onnx Python
// package expect. This is how models beyond protobuf's 2 GiB limit are saved.
// Initializers stored in typed fields stay inline. m itself is not changed.
// The data file is written before the model, both atomically, so the model
// on disk never references data that is not there.
func (m *Model) SaveWithExternalData(path string, threshold int) error {
	out := m.Clone()
	location := filepath.Base(path) + ".data"
	var data bytes.Buffer
	for _, t := range initializers(out.Proto.GetGraph()) {
		raw := t.GetRawData()
		if len(raw) == 0 || len(raw) < threshold {
			continue
		}
		offset := data.Len()
		data.Write(raw)
		t.RawData = nil
		ext := onnxpb.TensorProto_EXTERNAL
		t.DataLocation = &ext
		t.ExternalData = []*onnxpb.StringStringEntryProto{
			entry("location", location),
			entry("offset", strconv.Itoa(offset)),
			entry("length", strconv.Itoa(len(raw))),
		}
	}
	if data.Len() > 0 {
		dataPath := filepath.Join(filepath.Dir(path), location)
		if err := atomicfile.Write(dataPath, data.Bytes(), 0o644); err != nil {
			return fmt.Errorf("onnx: %w", err)
		}
	}
	return out.Save(path)
}

func entry(k, v string) *onnxpb.StringStringEntryProto {
	return &onnxpb.StringStringEntryProto{Key: &k, Value: &v}
}

// initializers lists the initializers of g and of all its subgraphs.
func initializers(g *onnxpb.GraphProto) []*onnxpb.TensorProto {
	if g == nil {
		return nil
	}
	out := append([]*onnxpb.TensorProto(nil), g.GetInitializer()...)
	for _, n := range g.GetNode() {
		for _, a := range n.GetAttribute() {
			out = append(out, initializers(a.GetG())...)
			for _, sg := range a.GetGraphs() {
				out = append(out, initializers(sg)...)
			}
		}
	}
	return out
}
