package onnx

import (
	"bytes"
	"encoding/binary"
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

// safetensorsHeader reports whether head starts as a safetensors file
// does: an 8-byte little-endian header length, then the JSON header.
func safetensorsHeader(head []byte) bool {
	if len(head) < 10 {
		return false
	}
	n := binary.LittleEndian.Uint64(head[:8])
	return n > 1 && n < 100<<20 && head[8] == '{' && head[9] == '"'
}
