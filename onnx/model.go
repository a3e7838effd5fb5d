// Package onnx reads, queries, edits, builds and writes ONNX models.
//
// A Model wraps the protobuf generated from the official schema (package
// onnxpb) together with the folder it came from, which is where external
// tensor data is resolved. Loading is defensive: ONNX files arrive from users
// and the internet, so every size and path in them is checked before use.
// Graphs built in code go through Builder, the project's one graph builder,
// and the constructors of build.go (attributes, value infos, NewModel).
package onnx

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/internal/atomicfile"

	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// MaxModelBytes bounds the size of a model file that Load reads into memory.
// Protobuf caps messages at 2 GiB; larger models must use external data.
const MaxModelBytes = 2 << 30

// Model is an ONNX model and the folder its external data is resolved in.
type Model struct {
	Proto *onnxpb.ModelProto
	// Path is the file the model was loaded from; empty for models built in memory.
	Path string
	// Dir is the folder external data paths are relative to.
	Dir string
	// WeightInputs counts the graph inputs that were also initializers
	// (the IR<4 convention) and that Load, Parse or DropWeightInputs
	// removed; FileIRVersion is the IR version the file declared where
	// that raised it (to WeightInputIRVersion), else 0.
	WeightInputs  int
	FileIRVersion int64
}

// Graph returns the model's main graph, creating an empty one if absent.
func (m *Model) Graph() *onnxpb.GraphProto {
	if m.Proto.Graph == nil {
		m.Proto.Graph = &onnxpb.GraphProto{}
	}
	return m.Proto.Graph
}

// Load reads and parses the model at path. External data is loaded into the
// initializers (see LoadExternalData), so the returned model is self-contained.
// A file that was read but is no model is a *FormatError.
func Load(path string) (*Model, error) {
	// Devices and pipes report size 0 and could stream without end, and
	// opening a FIFO blocks: only regular files are opened.
	f, st, err := regfile.Open(path)
	if err != nil {
		if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
			if hint := lookInFolder(path); hint != "" {
				return nil, fmt.Errorf("onnx: %s is a directory, not an ONNX file; %s", path, hint)
			}
			return nil, fmt.Errorf("onnx: %s is a directory, not an ONNX file", path)
		}
		return nil, fmt.Errorf("onnx: %w", err)
	}
	defer f.Close()
	if st.Size() > MaxModelBytes {
		return nil, fmt.Errorf("onnx: %s is %d bytes, more than the protobuf limit of 2 GiB", path, st.Size())
	}
	data, err := readSized(f, st.Size(), MaxModelBytes)
	if errors.Is(err, errGrew) {
		return nil, fmt.Errorf("onnx: %s grew past the protobuf limit of 2 GiB while being read", path)
	}
	if err != nil {
		return nil, fmt.Errorf("onnx: reading %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", path, err)
	}
	m, err := parse(data, filepath.Dir(abs))
	if err != nil {
		fe := &FormatError{Path: path, Err: err, LooksLike: looksLikeUnless(err, data)}
		if fe.LooksLike == "" && errors.Is(err, errNoGraph) {
			fe.LooksLike = looksLikeByName(path)
		}
		return nil, fe
	}
	m.Path = path
	return m, nil
}

// errGrew is readSized's error for a file that grew past its limit while
// being read.
var errGrew = errors.New("grew past the limit while being read")

// readSized reads r to its end in one allocation of size+1 bytes, size
// being what the file's stat said (io.ReadAll's doubling took 31 MB for a
// 13 MB model, all garbage once parsed). A file that shrank since is read
// as it is now; one that grew is read on, up to limit bytes, past which it
// is errGrew. size must already be within limit.
func readSized(r io.Reader, size, limit int64) ([]byte, error) {
	// The extra byte tells a file that grew from one read to its end.
	data := make([]byte, size+1)
	n, err := io.ReadFull(r, data)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return data[:n], nil
	case err != nil:
		return nil, err
	}
	rest, err := io.ReadAll(io.LimitReader(r, limit+1-int64(n)))
	if err != nil {
		return nil, err
	}
	data = append(data, rest...)
	if int64(len(data)) > limit {
		return nil, errGrew
	}
	return data, nil
}

// FormatError reports bytes that do not make a usable ONNX model: empty,
// not an ONNX protobuf, no graph, tensors whose sizes do not add up,
// messages nested deeper than ONNX Runtime parses, or external data that
// cannot be read. A caller tells it from a file that could not be read at
// all (a missing file, a folder, a FIFO), which Load reports as they are.
type FormatError struct {
	Path string // the model file; "" when the bytes came from elsewhere
	Err  error  // what is wrong
	// LooksLike names the kind of file the bytes are instead, with what to
	// do about it (LooksLike's words), where they are not an ONNX protobuf
	// and start like a kind it knows; "" otherwise.
	LooksLike string
}

func (e *FormatError) Error() string {
	msg := e.Err.Error()
	if e.LooksLike != "" {
		msg += "; it looks like " + e.LooksLike
	}
	if e.Path == "" {
		return msg
	}
	if hint := nameHint(e.Path); hint != "" && e.LooksLike == "" { // content names it better than the name
		msg += " (" + hint + ")"
	}
	return "onnx: " + e.Path + ": " + msg
}

// nameHint says, for a file that is no ONNX model, what its name suggests
// it is and how to get an ONNX model from it ("" when the name says
// nothing).
func nameHint(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".pt", ".pth", ".ckpt", ".bin", ".safetensors":
		return "a PyTorch file? export the model with torch.onnx.export, as README's quickstart shows"
	case ".pb", ".h5", ".keras", ".tflite":
		return "a TensorFlow or Keras model? convert it with tf2onnx: python3 -m tf2onnx.convert"
	case ".xml":
		return "an OpenVINO IR? export its source model to ONNX instead"
	}
	return ""
}

func (e *FormatError) Unwrap() error { return e.Err }

// Parse decodes a serialized model. dir is the folder external data is
// resolved in; pass "" for a model that must not reference external files.
// What keeps the bytes from being a model is a *FormatError.
func Parse(data []byte, dir string) (*Model, error) {
	m, err := parse(data, dir)
	if err != nil {
		return nil, &FormatError{Err: err, LooksLike: looksLikeUnless(err, data)}
	}
	return m, nil
}

// errNotProtobuf is bytes that do not decode as a ModelProto.
var errNotProtobuf = errors.New("not a valid ONNX protobuf")

// errNoGraph is a protobuf without a graph, which other kinds of file
// can parse as.
var errNoGraph = errors.New("not an ONNX model: no graph")

// looksLikeUnless is LooksLike(data) where err says that the bytes are no
// ONNX protobuf at all (not a model that is merely broken), else "".
func looksLikeUnless(err error, data []byte) string {
	if errors.Is(err, errNotProtobuf) || errors.Is(err, errNoGraph) {
		return LooksLike(data)
	}
	return ""
}

func parse(data []byte, dir string) (*Model, error) {
	if len(data) == 0 {
		return nil, errors.New("empty file, not an ONNX model")
	}
	pb := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(data, pb); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotProtobuf, err)
	}
	if pb.Graph == nil {
		return nil, errNoGraph
	}
	m := &Model{Proto: pb, Dir: dir}
	if err := m.validate(); err != nil {
		return nil, err
	}
	if err := m.LoadExternalData(); err != nil {
		return nil, err
	}
	m.DropWeightInputs()
	return m, nil
}

// Marshal serializes the model deterministically.
func (m *Model) Marshal() ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m.Proto)
}

// Save writes the model to path atomically: a crash never leaves a truncated
// model behind, and an existing file is replaced only once the new one is
// complete.
func (m *Model) Save(path string) error {
	data, err := m.Marshal()
	if err != nil {
		return fmt.Errorf("onnx: encoding %s: %w", path, err)
	}
	if len(data) > MaxModelBytes {
		return fmt.Errorf("onnx: %s would be %d bytes, more than the protobuf limit of 2 GiB; use SaveWithExternalData", path, len(data))
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("onnx: %w", err)
	}
	return nil
}

// Clone returns a deep copy of the model.
func (m *Model) Clone() *Model {
	return &Model{Proto: proto.Clone(m.Proto).(*onnxpb.ModelProto), Path: m.Path, Dir: m.Dir, WeightInputs: m.WeightInputs, FileIRVersion: m.FileIRVersion}
}
