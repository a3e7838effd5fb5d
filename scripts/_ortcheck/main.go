// Command ortcheck runs every model of the foreign-model corpus
// (scripts/gen_foreign_models.py) on ONNX Runtime with its reference input and
// compares the outputs with the generator's reference outputs: an independent
// check that the rewrites mean on ONNX Runtime what the generator's torch-op
// evaluator says they mean. It uses segtune's runtime package only, none of
// segtune's model handling.
//
//	go run ./scripts/_ortcheck [CORPUS_DIR]
//
// The leading underscore keeps it out of ./... (vet, test, build).
package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/segtune/segtune/runtime"
)

type ref struct {
	Input      string  `json:"input"`
	InputShape []int64 `json:"input_shape"`
	Outputs    []struct {
		Name  string  `json:"name"`
		File  string  `json:"file"`
		Shape []int64 `json:"shape"`
	} `json:"outputs"`
}

type manifest struct {
	Models map[string]struct {
		File      string `json:"file"`
		Reference *ref   `json:"reference"`
	} `json:"models"`
}

func readF32(path string) ([]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

func check(dir, file string, r *ref) (string, error) {
	x, err := readF32(filepath.Join(dir, r.Input))
	if err != nil {
		return "", err
	}
	s, err := runtime.NewSessionFromFile(filepath.Join(dir, file), runtime.Options{Threads: 2})
	if err != nil {
		return "", err
	}
	defer s.Close()
	outs, err := s.Run(runtime.NewFloat32(r.InputShape, x))
	if err != nil {
		return "", err
	}
	msg := ""
	for k, o := range r.Outputs {
		want, err := readF32(filepath.Join(dir, o.File))
		if err != nil {
			return "", err
		}
		got := outs[k]
		if fmt.Sprint(got.Shape) != fmt.Sprint(o.Shape) {
			return "", fmt.Errorf("output %q: shape %v, want %v", o.Name, got.Shape, o.Shape)
		}
		var worst, scale float64
		for i, w := range want {
			worst = math.Max(worst, math.Abs(float64(got.Float32[i]-w)))
			scale = math.Max(scale, math.Abs(float64(w)))
		}
		msg += fmt.Sprintf(" %s: max|ort-ref|=%.2e (|ref|<=%.3g)", o.Name, worst, scale)
		if worst > 1e-3*math.Max(1, scale) {
			return msg, fmt.Errorf("output %q differs from the reference", o.Name)
		}
	}
	return msg, nil
}

func main() {
	dir := "testdata/generated/foreign"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := runtime.Init(""); err != nil {
		fmt.Fprintln(os.Stderr, "ortcheck:", err)
		os.Exit(2)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ortcheck:", err)
		os.Exit(2)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		fmt.Fprintln(os.Stderr, "ortcheck:", err)
		os.Exit(2)
	}
	names := make([]string, 0, len(m.Models))
	for n := range m.Models {
		names = append(names, n)
	}
	sort.Strings(names)
	failed := 0
	for _, n := range names {
		e := m.Models[n]
		if e.Reference == nil {
			continue
		}
		msg, err := check(dir, e.File, e.Reference)
		if err != nil {
			failed++
			fmt.Printf("FAIL %s:%s %v\n", n, msg, err)
			continue
		}
		fmt.Printf("ok   %s:%s\n", n, msg)
	}
	if failed > 0 {
		os.Exit(1)
	}
}
