package imageio

import (
	"encoding/json"
	"testing"
)

// FuzzParseSidecar: whatever the bytes of a sidecar or --preprocess file,
// parsing returns a valid sidecar or an error, never panics, and a sidecar
// it accepts survives a write and re-read unchanged in meaning.
func FuzzParseSidecar(f *testing.F) {
	for _, s := range []string{
		`{"version": 1}`,
		`{"version": 1, "preprocess": {"resize": "scale", "scale_factor": 2, "multiple_of": 8, "plus_one": true, "value_scale": 0.00784313725490196, "value_offset": -1}, "classes": ["background", "person"], "label_map": "9,10:1;11:255;*:0"}`,
		`{"version": 1, "preprocess": {"height": 513, "width": 513, "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225], "layout": "nhwc", "channel_order": "bgr"}}`,
		`{"version": 1, "classes": ["a", "b"], "palette": [[0, 0, 0], [255, 0, 0]], "ignore_label": 255}`,
		`{"version": 2}`,
		`{"version": 1, "preprocess": {"height": -1}}`,
		`{"version": 1, "preprocess": {"std": [0, 0, 0]}}`,
		`{"version": 1} {}`,
		`[]`, `null`, ``, `{"versio": 1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSidecar(data, "fuzz.json")
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted an invalid sidecar: %v", err)
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("accepted sidecar does not encode: %v", err)
		}
		again, err := ParseSidecar(out, "again.json")
		if err != nil {
			t.Fatalf("re-reading %s: %v", out, err)
		}
		out2, _ := json.Marshal(again)
		if string(out) != string(out2) {
			t.Fatalf("round trip changed the sidecar:\n%s\n%s", out, out2)
		}
	})
}
