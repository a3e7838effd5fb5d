package trainer

import (
	"fmt"

	"github.com/segtune/segtune/internal/setting"
)

// Notice is a line a run tells its user as it goes about its settings: one
// it changed, one it could not honour here, or how to continue it. Named
// words it with each setting called name(key); String names them by key.
type Notice interface {
	String() string
	Named(name func(key string) string) string
}

// FallbackNotice: the Value of the setting Setting (its config key)
// cannot be honoured here, and the run goes on without it; Reason says why
// and what it does instead.
type FallbackNotice struct{ Setting, Value, Reason string }

func (n FallbackNotice) String() string { return n.Named(setting.Key) }

func (n FallbackNotice) Named(name func(key string) string) string {
	return fmt.Sprintf("segtune: %s %s: %s", name(n.Setting), n.Value, n.Reason)
}

// DefaultNotice: for the Value of the setting Setting the run chose a
// default, Chosen, for the reason Why; the setting Override sets another
// (both config keys).
type DefaultNotice struct{ Setting, Value, Chosen, Why, Override string }

func (n DefaultNotice) String() string { return n.Named(setting.Key) }

func (n DefaultNotice) Named(name func(key string) string) string {
	return fmt.Sprintf("segtune: %s %s: %s (%s; %s overrides it)", name(n.Setting), n.Value, n.Chosen, n.Why, name(n.Override))
}
