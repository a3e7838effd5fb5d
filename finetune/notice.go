package finetune

import (
	"fmt"
	"strings"

	"github.com/segtune/segtune/finetune/trainer"
	"github.com/segtune/segtune/internal/setting"
)

// Notice is a line a run tells its user as it goes about its settings
// (trainer.Notice).
type Notice = trainer.Notice

// FallbackNotice and DefaultNotice come from the graph side, which
// chooses the precision, the state's place and the CUDA options.
type (
	FallbackNotice = trainer.FallbackNotice
	DefaultNotice  = trainer.DefaultNotice
)

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

// notice hands n to h.Notice, or writes its words to h.Log.
func (h Hooks) notice(n Notice) {
	switch {
	case h.Notice != nil:
		h.Notice(n)
	case h.Log != nil:
		fmt.Fprintln(h.Log, n)
	}
}
