package finetune

import (
	"fmt"
	"strings"

	"github.com/segtune/segtune/internal/setting"
)

// Notice is a line a run tells its user as it goes about its settings: one
// it changed, one it could not honour here, or how to continue it. Named
// words it with each setting called name(key); String names them by key.
type Notice interface {
	String() string
	Named(name func(key string) string) string
}

// ResumedNotice: a resumed run applies settings that may change on resume.
type ResumedNotice struct{ Changes []SettingChange }

func (n ResumedNotice) String() string { return n.Named(setting.Key) }

func (n ResumedNotice) Named(name func(key string) string) string {
	var parts []string
	for _, c := range sortedByName(n.Changes, name) {
		parts = append(parts, fmt.Sprintf("%s %s (was %s)", name(c.Setting), c.Value, c.Was))
	}
	return "resuming with " + strings.Join(parts, ", ")
}

// InterruptedNotice: an interrupted run saved its state to Checkpoint at
// Step; resuming the run continues from there.
type InterruptedNotice struct {
	Checkpoint string
	Step       int64
}

func (n InterruptedNotice) String() string { return n.Named(setting.Key) }

func (n InterruptedNotice) Named(name func(key string) string) string {
	return setting.Sprintf(name, "interrupted: saved %s at step %d; continue with {resume}", n.Checkpoint, n.Step)
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

// notice hands n to h.Notice, or writes its words to h.Log.
func (h Hooks) notice(n Notice) {
	switch {
	case h.Notice != nil:
		h.Notice(n)
	case h.Log != nil:
		fmt.Fprintln(h.Log, n)
	}
}
