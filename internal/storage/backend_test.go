package storage

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// The default build opens every accepted scheme; a build without one
// says which build tag left it out, before any request.
func TestBackendsForEveryScheme(t *testing.T) {
	for _, s := range Schemes {
		if _, ok := backends[s]; !ok {
			t.Errorf("no backend for %s:// in the default build", s)
		}
		if buildTags[s] == "" {
			t.Errorf("no build tag named for %s://", s)
		}
	}
	if len(backends) != len(Schemes) {
		t.Errorf("backends for %v, schemes %v", backends, Schemes)
	}
	saved := backends["gs"]
	delete(backends, "gs")
	defer func() { backends["gs"] = saved }()
	l, err := Parse("gs://bucket/prefix")
	if err != nil {
		t.Fatal(err)
	}
	_, err = openBucket(context.Background(), l)
	if err == nil || !strings.Contains(err.Error(), "built without gs:// support (build tag nogcs)") {
		t.Errorf("gs:// without its backend: %v", err)
	}
	if !slices.Contains(Schemes, "gs") {
		t.Fatal("gs is not a scheme")
	}
}
