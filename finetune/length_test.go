package finetune

import (
	"errors"
	"testing"

	"github.com/segtune/segtune/internal/setting"
)

// The run's length and learning rate are checked once, here, by the rule
// the CLI checks its flags with (LRRange): a config file gets the same.
func TestCheckLength(t *testing.T) {
	for _, c := range []struct {
		epochs   int
		steps    int64
		lr       float64
		key, msg string
	}{
		{1, 0, 0.01, "", ""},
		{0, 5, 10, "", ""},
		{0, 0, 0.01, "epochs", "epochs 0: needs max_steps"},
		{1, 0, 0, "lr", "lr 0: must be in (0, 10]"},
		{1, 0, 20, "lr", "lr 20: must be in (0, 10]"},
	} {
		err := CheckLength(c.epochs, c.steps, c.lr)
		var se *setting.Error
		switch {
		case c.key == "" && err != nil:
			t.Errorf("%+v: %v", c, err)
		case c.key != "" && (!errors.As(err, &se) || se.Setting != c.key || err.Error() != c.msg):
			t.Errorf("%+v: %v, want %q", c, err, c.msg)
		}
	}
	cfg := Config{Network: NetworkSpec{BaseModel: "m.onnx"}, Train: DataSpec{Images: "i", Masks: "m"},
		Batch: 1, Height: 8, Width: 8, Epochs: 1, LR: 11, Ignore: 255}
	if err := cfg.validate(); err == nil || err.Error() != "lr 11: must be in (0, 10]" {
		t.Errorf("a config with lr 11: %v", err)
	}
}
