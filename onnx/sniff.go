package onnx

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sniffBytes is how much of a file's start LooksLike reads.
const sniffBytes = 512

// LooksLike names the kind of file that head, a file's first bytes, starts
// like, with what to do to get an ONNX model from it, for a file that is
// no ONNX model; "" when the bytes match no kind it knows. It goes by
// content, not name: a web page saved as model.onnx is named for what it
// is.
func LooksLike(head []byte) string {
	if len(head) > sniffBytes {
		head = head[:sniffBytes]
	}
	text := bytes.ToLower(bytes.TrimLeft(head, " \t\r\n\ufeff"))
	has := func(prefix string) bool { return bytes.HasPrefix(head, []byte(prefix)) }
	switch {
	case bytes.HasPrefix(text, []byte("<!doctype html")) || bytes.HasPrefix(text, []byte("<html")) ||
		bytes.HasPrefix(text, []byte("<!--")) && bytes.Contains(text, []byte("<html")):
		return "an HTML page: a web page was saved in place of the file; download the file itself (on the Hugging Face Hub, the resolve/ link, not blob/)"
	case has("version https://git-lfs.github.com/spec/"):
		return "a Git LFS pointer, not the model: fetch the file itself (git lfs pull, or download it)"
	case has("PK\x03\x04") && bytes.Contains(head, []byte("saved_model.pb")):
		return "a zip archive of a TensorFlow SavedModel: unpack it and convert the folder with tf2onnx (" + tf2onnxSavedModel + ")"
	case has("PK\x03\x04") && (bytes.Contains(head, []byte("metadata.json")) || bytes.Contains(head, []byte("model.weights.h5"))):
		return "a Keras 3 model (.keras): convert it with tf2onnx (python3 -m tf2onnx.convert --keras FILE --output model.onnx)"
	case has("PK\x03\x04"):
		if bytes.Contains(head, []byte("data.pkl")) || bytes.Contains(head, []byte("/data/")) || bytes.Contains(head, []byte("version")) {
			return "a zip archive holding a PyTorch checkpoint (torch.save): export the model with torch.onnx.export"
		}
		return "a zip archive: a PyTorch checkpoint (torch.save) is one, to export with torch.onnx.export; another archive, unpack it and give the .onnx file inside"
	case len(head) >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5:
		return "a Python pickle (a PyTorch checkpoint saved by torch.save?): export the model with torch.onnx.export"
	case has("\x89HDF\r\n\x1a\n"):
		return "an HDF5 file (a Keras .h5 model?): convert it with tf2onnx (python3 -m tf2onnx.convert --keras FILE)"
	case len(head) >= 8 && string(head[4:8]) == "TFL3":
		return "a TensorFlow Lite model: convert it with tf2onnx (python3 -m tf2onnx.convert --tflite FILE)"
	case len(head) >= 8 && string(head[4:8]) == "ORTM":
		return "an ONNX Runtime format (.ort) model, which segtune cannot read: give the .onnx model it was converted from"
	case safetensorsHeader(head):
		return "a safetensors file: weights without the network; export the model with torch.onnx.export"
	case has("\x93NUMPY"):
		return "a NumPy array (.npy): weights without the network; export the model itself to ONNX"
	case tfGraphDef(head):
		return "a TensorFlow graph (a frozen .pb GraphDef): convert it with tf2onnx (python3 -m tf2onnx.convert --graphdef FILE --inputs … --outputs … --output model.onnx)"
	case has("\x1f\x8b"):
		return "a gzip file: unpack it (gunzip) and give the file inside"
	case has("\x89PNG\r\n\x1a\n") || has("\xff\xd8\xff"):
		return "an image, not a model"
	case bytes.HasPrefix(text, []byte("<?xml")) && bytes.Contains(text, []byte("<net ")):
		return "an OpenVINO IR: export its source model to ONNX instead"
	case bytes.HasPrefix(text, []byte("<?xml")):
		return "an XML file, not a model"
	case bytes.HasPrefix(text, []byte("{")):
		return "a JSON file, not a model (a config or sidecar file?)"
	}
	return ""
}

// tf2onnxSavedModel is tf2onnx's command for a SavedModel folder.
const tf2onnxSavedModel = "python3 -m tf2onnx.convert --saved-model DIR --output model.onnx"

// tfGraphDef reports whether head starts as a TensorFlow GraphDef does:
// its first node (field 1, length-delimited) whose name (field 1) and op
// (field 2) are identifiers. An ONNX model starts with field 1 as a
// varint (ir_version), so the two do not meet.
func tfGraphDef(head []byte) bool {
	if len(head) < 6 || head[0] != 0x0a {
		return false
	}
	_, n := binary.Uvarint(head[1:])
	if n <= 0 {
		return false
	}
	rest := head[1+n:]
	for _, tag := range []byte{0x0a, 0x12} { // NodeDef.name, NodeDef.op
		if len(rest) < 2 || rest[0] != tag {
			return false
		}
		l, n := binary.Uvarint(rest[1:])
		if n <= 0 || l == 0 || l > 256 || uint64(len(rest)-1-n) < l {
			return false
		}
		if !identifier(rest[1+n : 1+n+int(l)]) {
			return false
		}
		rest = rest[1+n+int(l):]
	}
	return true
}

// identifier reports whether b is printable ASCII without spaces, as
// TensorFlow node names and op types are.
func identifier(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// lookInFolder says what a folder given as a model holds that explains
// the mistake: a TensorFlow SavedModel (saved_model.pb), or ONNX files to
// pick from; "" otherwise.
func lookInFolder(dir string) string {
	if st, err := os.Stat(filepath.Join(dir, "saved_model.pb")); err == nil && st.Mode().IsRegular() {
		return "it looks like a TensorFlow SavedModel folder: convert it with tf2onnx (" + strings.Replace(tf2onnxSavedModel, "DIR", dir, 1) + ")"
	}
	onnxFiles, _ := filepath.Glob(filepath.Join(dir, "*.onnx"))
	if len(onnxFiles) > 0 {
		return fmt.Sprintf("it holds %s: give the model file itself", filepath.Base(onnxFiles[0]))
	}
	return ""
}

// looksLikeByName names a file by its name where its content did not:
// a SavedModel's saved_model.pb, which starts as an ONNX model can.
func looksLikeByName(path string) string {
	if filepath.Base(path) == "saved_model.pb" {
		return "the graph of a TensorFlow SavedModel: convert its folder with tf2onnx (" + strings.Replace(tf2onnxSavedModel, "DIR", filepath.Dir(path), 1) + ")"
	}
	return ""
}

// safetensorsHeader reports whether head starts as a safetensors file
// does: an 8-byte little-endian header length, then the JSON header.
func safetensorsHeader(head []byte) bool {
	if len(head) < 10 {
		return false
	}
	n := binary.LittleEndian.Uint64(head[:8])
	return n > 1 && n < 100<<20 && head[8] == '{' && head[9] == '"'
}
