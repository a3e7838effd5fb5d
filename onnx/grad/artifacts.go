package grad

import (
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/onnx"
)

// Artifact file names inside the output folder of WriteArtifacts.
const (
	TrainingFile = "training.onnx"
	EvalFile     = "eval.onnx"
	// ParamsFile is an ONNX model whose graph has no nodes: its initializers
	// are the trainable parameters' initial values (open it in Netron, or
	// read it with any ONNX library).
	ParamsFile   = "params.onnx"
	ManifestFile = "manifest.json"
)

// WriteArtifacts writes gs to dir (created if needed): training.onnx,
// eval.onnx, params.onnx and manifest.json, each atomically.
func WriteArtifacts(dir string, gs *Graphs) error {
	if gs == nil || gs.Training == nil || gs.Eval == nil {
		return fmt.Errorf("grad: no graphs to write")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("grad: %w", err)
	}
	if err := gs.Training.Save(filepath.Join(dir, TrainingFile)); err != nil {
		return fmt.Errorf("grad: %w", err)
	}
	if err := gs.Eval.Save(filepath.Join(dir, EvalFile)); err != nil {
		return fmt.Errorf("grad: %w", err)
	}
	if err := ParamsModel(gs).Save(filepath.Join(dir, ParamsFile)); err != nil {
		return fmt.Errorf("grad: %w", err)
	}
	man, err := gs.Manifest.JSON()
	if err != nil {
		return fmt.Errorf("grad: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, ManifestFile), man, 0o644); err != nil {
		return fmt.Errorf("grad: %w", err)
	}
	return nil
}

// ParamsModel wraps the trainable parameters in a node-less ONNX model,
// with one graph output per parameter so viewers list them.
func ParamsModel(gs *Graphs) *onnx.Model {
	g := &onnx.GraphProto{Name: proto.String("segtune_params")}
	for _, p := range gs.Params {
		g.Initializer = append(g.Initializer, p)
		g.Output = append(g.Output, valueInfo(p.GetName(), p.GetDataType(), p.GetDims()))
	}
	return &onnx.Model{Proto: &onnx.ModelProto{
		IrVersion:    gs.Training.Proto.IrVersion,
		OpsetImport:  gs.Training.Proto.OpsetImport,
		ProducerName: proto.String("segtune"),
		Graph:        g,
	}}
}

// LoadParams reads a params file written by WriteArtifacts.
func LoadParams(path string) ([]*onnx.TensorProto, error) {
	m, err := onnx.Load(path)
	if err != nil {
		return nil, err
	}
	return m.Proto.GetGraph().GetInitializer(), nil
}
