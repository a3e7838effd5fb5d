package inference

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// MaskIdentity names what decides the masks s makes: the model's bytes,
// its contract (how its output is read), the preprocessing and the
// tiling/TTA settings. segment writes it into its outputs
// (imageio.OutputModelKey): a rerun keeps an earlier mask only where it
// is the same, so that masks of another model are made again, never kept
// as done. Whether the arg-max runs in the graph or on the host is left
// out: the masks are the same either way. "" for a segmenter not opened
// from model bytes.
func (s *Segmenter) MaskIdentity() string {
	if s.modelDigest == nil {
		return ""
	}
	h := sha256.New()
	h.Write(s.modelDigest)
	// Marshalling plain structs of numbers and strings does not fail.
	for _, v := range []any{s.Contract, s.Pre, s.dense} {
		b, _ := json.Marshal(v)
		h.Write(b)
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// digest is the SHA-256 of a model's bytes, for MaskIdentity.
func digest(model []byte) []byte {
	d := sha256.Sum256(model)
	return d[:]
}
