package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// BenchmarkSegmentBucketVsLocal segments the same CamVid val images with
// the person model at its native size from a local folder into a local
// folder, and from a MinIO bucket on this machine into the bucket, at the
// same thread count: the object-storage path's cost over local files.
// Alternate the two with -count and compare medians:
//
//	go test ./cmd/segtune -run '^$' -bench SegmentBucketVsLocal -benchtime 3x -count 5
func BenchmarkSegmentBucketVsLocal(b *testing.B) {
	runtimetest.Require(b)
	clearShardEnv(b)
	m := testassets.RequireMinIO(b)
	model := testassets.Require(b, "models", "deeplabv3plus_person_dynamic.onnx")
	camvid := testassets.Require(b, "data", "camvid")
	url := m.Bucket(b, "segtune-bench")
	b.Setenv("SEGTUNE_CACHE_DIR", b.TempDir())
	in := b.TempDir()
	const n = 16
	entries, err := os.ReadDir(filepath.Join(camvid, "images", "val"))
	if err != nil || len(entries) < n {
		b.Fatalf("CamVid val: %v", err)
	}
	for _, e := range entries[:n] {
		if err := os.Symlink(filepath.Join(camvid, "images", "val", e.Name()), filepath.Join(in, e.Name())); err != nil {
			b.Fatal(err)
		}
	}
	upload(b, in, url("images"))
	args := []string{"--model", model, "--resize", "none", "--threads", "2"}
	for _, where := range []struct{ name, input, output string }{
		{"local", in, filepath.Join(b.TempDir(), "out")},
		{"bucket", url("images"), url("out")},
	} {
		b.Run(where.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				s := segmentJSON(b, append([]string{"--input", where.input, "--output", where.output}, args...)...)
				if s.Succeeded != n {
					b.Fatalf("%+v", s)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
}
