package runtime

import (
	"path/filepath"
	"testing"
)

func TestProfilePlacementOnCPU(t *testing.T) {
	requireORT(t)
	prefix := filepath.Join(t.TempDir(), "p")
	s, err := NewSession(addModel(t), Options{Threads: 1, Tuning: Tuning{ProfilePrefix: prefix}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(NewFloat32([]int64{2, 3}, make([]float32, 6))); err != nil {
		t.Fatal(err)
	}
	s.Close()
	p, err := ProfilePlacement(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if p.PerEP["CPUExecutionProvider"] != 1 || len(p.CPUNodes) != 1 || p.CPUOps["Add"] != 1 {
		t.Errorf("placement %+v", p)
	}
}

func TestAvailableProviders(t *testing.T) {
	requireORT(t)
	ps, err := AvailableProviders()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range ps {
		found = found || p == "CPUExecutionProvider"
	}
	if !found {
		t.Errorf("providers %v", ps)
	}
}
