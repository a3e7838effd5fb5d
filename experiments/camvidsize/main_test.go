package main

import (
	"os"
	"path/filepath"
	"testing"
)

// A run counts as finished only with its model exported and every epoch
// logged; its training time is the epochs' seconds.
func TestTrainedSeconds(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("metrics.jsonl", `{"kind":"step","seconds":9}
{"kind":"epoch","seconds":60}
{"kind":"epoch","seconds":30}
`)
	if _, ok := trainedSeconds(dir, 2); ok {
		t.Error("finished without model.onnx")
	}
	write("model.onnx", "x")
	if _, ok := trainedSeconds(dir, 3); ok {
		t.Error("finished with 2 of 3 epochs")
	}
	if s, ok := trainedSeconds(dir, 2); !ok || s != 90 {
		t.Errorf("trainedSeconds = %v, %v; want 90, true", s, ok)
	}
}

func TestParseRows(t *testing.T) {
	if rows, err := parseRows(""); err != nil || len(rows) != len(variants) {
		t.Errorf("default rows %v, %v", rows, err)
	}
	if rows, err := parseRows("1, 3"); err != nil || len(rows) != 2 || rows[0] != 1 || rows[1] != 3 {
		t.Errorf("rows %v, %v", rows, err)
	}
	for _, bad := range []string{"x", "-1", "99"} {
		if _, err := parseRows(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
