package folder_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/shard"
)

func TestSummary(t *testing.T) {
	rep := pipeline.Report{Total: 5, Succeeded: 2, Skipped: 2, Elapsed: 4 * time.Second, InferElapsed: time.Second,
		Failures: []pipeline.Failure{{Path: "in/b.png", Err: errors.New("bad PNG")}}}
	sum := folder.Summarize(rep, "cpu", 4, "out", shard.Spec{Index: 1, Count: 3})
	if sum.Failed != 1 || sum.ImagesPerSec != 0.5 || sum.Shard != "1/3" || sum.Decoders == "" {
		t.Errorf("summary %+v: want 1 failed, 0.5 images/s, shard 1/3, the decoders named", sum)
	}
	var text strings.Builder
	if err := sum.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if want := "segmented 2 of 5 images (shard 1/3) (2 already done) into out in 4.0s (0.50 images/s, cpu, batch 4)\n"; text.String() != want {
		t.Errorf("text %q; want %q", text.String(), want)
	}
	data, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"failures":[{"path":"in/b.png","error":"bad PNG"}]`) {
		t.Errorf("JSON %s: want the failure by path and error", data)
	}

	// One run over every image: no shard; no failures is an empty list.
	sum = folder.Summarize(pipeline.Report{Total: 1, Succeeded: 1}, "cpu", 1, "out", shard.All)
	if data, _ := json.Marshal(sum); sum.Shard != "" || !strings.Contains(string(data), `"failures":[]`) || strings.Contains(string(data), "shard") {
		t.Errorf("unsharded JSON %s: want no shard, an empty failure list", data)
	}
}
