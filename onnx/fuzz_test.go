package onnx

import (
	goruntime "runtime"
	"testing"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// FuzzParse feeds arbitrary bytes to Parse and, when they parse, to every
// query a command might run on an untrusted model. Nothing may panic, and
// Parse may allocate only in proportion to its input: sizes declared inside
// the file (dims, lengths) must be checked before they are trusted.
func FuzzParse(f *testing.F) {
	for _, m := range []*Model{tinyModel(), ifModel(), summaryModel()} {
		b := marshal(f, m)
		f.Add(b)
		for _, n := range []int{1, 2, len(b) / 3, len(b) / 2, len(b) - 1} {
			f.Add(b[:n])
		}
	}
	for _, tensor := range hostileTensors() {
		f.Add(withTensor(f, tensor))
	}
	ext := tinyModel()
	c := ext.Initializer("c")
	c.RawData, c.DataLocation = nil, onnxpb.TensorProto_EXTERNAL.Enum()
	c.ExternalData = []*onnxpb.StringStringEntryProto{entry("location", "../../etc/passwd"), entry("offset", "-1")}
	f.Add(marshal(f, ext))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		m, err := Parse(data, "")
		goruntime.ReadMemStats(&after)
		// Protobuf decoding turns a 2-byte empty message into a struct of a
		// few hundred bytes; nothing else may scale with declared sizes.
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 512*uint64(len(data))+1<<20 {
			t.Fatalf("Parse of %d bytes allocated %d bytes", len(data), grown)
		}
		if err != nil {
			return
		}
		exercise(m)
	})
}

// exercise runs the read-only queries on m, ignoring their errors.
func exercise(m *Model) {
	g := m.Graph()
	_ = m.Summary().String()
	_ = m.Opset("")
	_, _ = TopoSort(g)
	_ = Consumers(g)
	_ = Producers(g)
	_ = DataInputs(g)
	for _, v := range g.GetOutput() {
		_ = ValueInfo(g, v.GetName())
	}
	for _, t := range m.allTensors() {
		_, _ = Float32s(t)
		_, _ = Float64s(t)
		_, _ = Int64s(t)
		_, _ = Float16s(t)
	}
	if _, err := m.Marshal(); err != nil {
		panic(err)
	}
	_ = m.Clone()
}
