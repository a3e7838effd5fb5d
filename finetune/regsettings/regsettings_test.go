package regsettings

import (
	"errors"
	"testing"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/internal/setting"
)

// Apply refuses a number of Grid or SizeBins outside SharesRange by the
// list's key, and takes lists of shares.
func TestApplyRefusesSharesByKey(t *testing.T) {
	apply := func(grid, bins string) (finetune.Config, error) {
		r := Settings{Reg: *finetune.DefaultRegularizer(1), Grid: grid, SizeBins: bins, View: "auto"}
		cfg := finetune.DefaultConfig()
		return cfg, r.Apply(&cfg)
	}
	for _, c := range []struct{ grid, bins, key string }{{"0.1,1.5", "", "grid"}, {"", "-0.2", "size_bins"}} {
		var se *setting.Error
		if _, err := apply(c.grid, c.bins); !errors.As(err, &se) || se.Setting != c.key {
			t.Errorf("grid %q, bins %q: %v; want a *setting.Error for %s", c.grid, c.bins, err, c.key)
		}
	}
	if cfg, err := apply("0.1,0.2", "0.3"); err != nil || len(cfg.Size.Bins) != 1 {
		t.Errorf("shares in range: %v, bins %v", err, cfg.Size.Bins)
	}
}
