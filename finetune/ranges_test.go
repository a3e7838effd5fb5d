package finetune

import (
	"errors"
	"testing"

	"github.com/segtune/segtune/internal/setting"
)

// A number out of its range is refused by its key, the regularizer's
// dual steps included; the defaults pass.
func TestCheckRanges(t *testing.T) {
	def := DefaultConfig()
	def.Regularizer = DefaultRegularizer(1)
	if err := def.CheckRanges(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for key, edit := range map[string]func(*Config){
		"momentum":  func(c *Config) { m := 1.5; c.Momentum = &m },
		"rotate":    func(c *Config) { c.Augment.Geometric.Rotate = 200 },
		"max_steps": func(c *Config) { c.MaxSteps = -1 },
		"batch":     func(c *Config) { c.Batch = 0 },
		"epochs":    func(c *Config) { c.Epochs = -1 },
		"ignore":    func(c *Config) { c.Ignore = 300 },
		"c_mu":      func(c *Config) { c.Regularizer = DefaultRegularizer(1); c.Regularizer.Dual.CMu = -1 },
	} {
		c := DefaultConfig()
		edit(&c)
		var se *setting.Error
		if err := c.CheckRanges(); !errors.As(err, &se) || se.Setting != key {
			t.Errorf("%s out of range: %v", key, err)
		}
	}
}
