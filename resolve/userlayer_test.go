package resolve

import (
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
)

// A user's layer refuses a bad size and a threshold given as 0 naming
// the setting by key (its caller's name through setting.Rename), and
// lets --size imply the stretch resize.
func TestUserLayerSidecar(t *testing.T) {
	flag := func(key string) string { return "--" + key }
	for _, tc := range []struct {
		l    UserLayer
		want string
	}{
		{UserLayer{Size: "12xq"}, `--size: size "12xq": want HxW with positive integers, e.g. 513x513`},
		{UserLayer{ThresholdGiven: true}, "--threshold 0: want a probability in (0, 1)"},
	} {
		if _, err := tc.l.Sidecar(); err == nil || setting.Rename(err, flag).Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.l, err, tc.want)
		}
	}
	s, err := UserLayer{Size: "4x6"}.Sidecar()
	if err != nil || s.Preprocess.Resize != imageio.ResizeStretch || s.Preprocess.Height != 4 || s.Output != nil {
		t.Errorf("--size 4x6: %+v, %v", s.Preprocess, err)
	}
}
