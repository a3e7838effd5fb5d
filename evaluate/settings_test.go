package evaluate

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/setting"
)

// Settings name what is wrong by key: data given two ways, a confusion
// folder that is an input folder or holds the data set's files, a bad
// list of size classes; ignore replaces the model's own only when given.
func TestSettingsRefuseByKey(t *testing.T) {
	dir := t.TempDir()
	images, masks := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	os.Mkdir(images, 0o755)
	os.Mkdir(masks, 0o755)
	all := func(string) bool { return true }
	s := DefaultSettings()
	s.Given, s.Data = all, "d"
	if err := s.Validate(); err == nil || err.Error() != "give data, or images and masks, not both" {
		t.Errorf("both: %v", err)
	}
	var se *setting.Error
	for key, edit := range map[string]func(*Settings){
		"batch":          func(s *Settings) { s.Batch = 0 },
		"ignore":         func(s *Settings) { s.Ignore = -1 },
		"size_threshold": func(s *Settings) { s.SizeThreshold = 1.5 },
	} {
		s = DefaultSettings()
		s.Images, s.Masks = images, masks
		edit(&s)
		if err := s.Validate(); !errors.As(err, &se) || se.Setting != key {
			t.Errorf("%s out of range: %v", key, err)
		}
	}
	s = DefaultSettings()
	s.Images, s.Masks, s.Confusion = images, masks, masks
	if err := s.Validate(); err == nil || err.Error() != "confusion "+masks+" is the masks folder; choose a folder of its own" {
		t.Errorf("confusion on masks: %v", err)
	}
	s.Confusion = dir
	set := &datalayout.Set{Samples: []datalayout.Sample{{Image: filepath.Join(dir, "a.png"), Mask: filepath.Join(masks, "a.png")}}}
	if err := s.CheckConfusion(set); err == nil || err.Error() != "confusion "+dir+" holds data's files; choose a folder of its own" {
		t.Errorf("confusion holding the data: %v", err)
	}
	s.SizeClasses = "1,x"
	if _, err := s.Request(imageio.Sidecar{}, imageio.MaskOptions{}); !errors.As(err, &se) || se.Setting != "size_classes" {
		t.Errorf("size classes 1,x: %v", err)
	}
	s.SizeClasses, s.Ignore, s.ClassNames = "1", 7, "a,b"
	r, err := s.Request(imageio.Sidecar{}, imageio.MaskOptions{})
	if o := r.Options; err != nil || o.Ignore != nil || len(o.ClassNames) != 2 || len(o.SizeClasses) != 1 {
		t.Errorf("ignore not given: %+v, %v", o, err)
	}
	s.Given = all
	if r, _ := s.Request(imageio.Sidecar{}, imageio.MaskOptions{}); r.Options.Ignore == nil || *r.Options.Ignore != 7 {
		t.Errorf("ignore given: %+v", r.Options)
	}
}
