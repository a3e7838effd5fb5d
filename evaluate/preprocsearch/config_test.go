package preprocsearch

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/imageio"
)

// The search's settings are refused without the search, its data given
// twice or not at all, a negative sample and force without the sidecar;
// an existing sidecar is kept unless force.
func TestConfigRefusesByKey(t *testing.T) {
	given := func(keys ...string) func(string) bool {
		return func(k string) bool {
			for _, g := range keys {
				if g == k {
					return true
				}
			}
			return false
		}
	}
	for _, c := range []struct {
		cfg  func(*Config)
		want string
	}{
		{func(c *Config) { c.Find, c.Given = false, given("sample") }, "sample goes with find_preprocessing"},
		{func(c *Config) { c.Given = given("data", "masks") }, "find_preprocessing: give data, or images and masks, not both"},
		{func(c *Config) { c.Images = "i" }, "find_preprocessing needs labelled images: images DIR and masks DIR, or data DIR"},
		{func(c *Config) { c.Images, c.Masks, c.Sample = "i", "m", -1 }, "sample -1: want a number of images, or 0 for all"},
		{func(c *Config) { c.Images, c.Masks, c.Force = "i", "m", true }, "force goes with write_sidecar"},
		{func(c *Config) { c.Images, c.Masks = "i", "m" }, ""},
	} {
		cfg := DefaultConfig()
		cfg.Find = true
		c.cfg(&cfg)
		err := cfg.Validate()
		if got := ""; err != nil || c.want != "" {
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("%+v: %q, want %q", cfg, got, c.want)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "m.segtune.json")
	cfg := DefaultConfig()
	if err := cfg.SaveSidecar(path, imageio.Sidecar{}, Score{}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.SaveSidecar(path, imageio.Sidecar{}, Score{}); err == nil || err.Error() != "write_sidecar: "+path+" exists; force replaces it" {
		t.Errorf("over an existing sidecar: %v", err)
	}
	cfg.Force = true
	if err := cfg.SaveSidecar(path, imageio.Sidecar{}, Score{}); err != nil {
		t.Errorf("forced: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Error(err)
	}
}
