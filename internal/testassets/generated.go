package testassets

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Generated returns the path of elem inside the repository's
// testdata/generated folder, where `make test` writes what scripts generate
// (PyTorch exports, the foreign-model corpus), skipping the test when it
// is absent (failing under SEGTUNE_REQUIRE_ASSETS, as Require does).
func Generated(tb testing.TB, elem ...string) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	rel := filepath.Join(append([]string{"testdata", "generated"}, elem...)...)
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break // the repository's root: no further up
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	SkipOrFail(tb, "%s is missing: run make test (or make torch-models foreign-models transformer-models)", rel)
	return ""
}

// TransformerExport is one model of the corpus that
// scripts/gen_transformer_models.py writes (make transformer-models).
type TransformerExport struct {
	File    string `json:"file"`
	Family  string `json:"family"`
	Opset   int    `json:"opset"`
	Dynamic bool   `json:"dynamic"`
	// NoFold: exported without constant folding and with the initializers
	// also listed as graph inputs (keep_initializers_as_inputs).
	NoFold bool `json:"nofold"`
	// Params maps each float initializer to the PyTorch parameter it
	// holds, the name of its gradient in the family's reference.
	Params map[string]string `json:"params"`
	// FiniteDifferences (dynamic exports) are float64 central differences
	// of the reference loss on the ONNX graph, for parameters that only an
	// affine Add/Mul or a Gather makes trainable.
	FiniteDifferences []FiniteDifference `json:"finite_differences"`
}

// FiniteDifference is the gradient of the reference loss with respect to
// some elements (flat indices) of one initializer, of a named kind
// ("Add after MatMul": a Linear's bias).
type FiniteDifference struct {
	Kind        string    `json:"kind"`
	Initializer string    `json:"initializer"`
	Elements    []int     `json:"elements"`
	Gradient    []float64 `json:"gradient"`
}

// TransformerCorpus returns the folder of the transformer corpus and its
// exports, in the manifest's order, skipping the test when the corpus is
// absent (failing under SEGTUNE_REQUIRE_ASSETS) and failing it when the
// manifest cannot be read or lists fewer exports than the generator writes
// (4 per family).
func TransformerCorpus(tb testing.TB) (string, []TransformerExport) {
	tb.Helper()
	dir := Generated(tb, "transformers", "manifest.json")
	dir = filepath.Dir(dir)
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var man struct {
		Models map[string]struct {
			Exports []TransformerExport `json:"exports"`
		} `json:"models"`
	}
	if err := json.Unmarshal(data, &man); err != nil {
		tb.Fatalf("%s: %v", filepath.Join(dir, "manifest.json"), err)
	}
	var out []TransformerExport
	families := []string{"segformer", "convnext_upernet", "swin", "swin_shifted", "unet_gn"}
	for _, fam := range families {
		out = append(out, man.Models[fam].Exports...)
	}
	if want := 4 * len(families); len(out) < want {
		tb.Fatalf("%s lists %d exports of the %d families; scripts/gen_transformer_models.py writes %d (rerun make transformer-models)",
			dir, len(out), len(families), want)
	}
	return dir, out
}
