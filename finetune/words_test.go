package finetune

import (
	"errors"
	"strings"
	"testing"
)

// The package's errors and notices name settings in its own words (a
// Config field or a setting's name), never a command-line flag: a caller
// names its flags itself.
func TestMessagesNameNoFlag(t *testing.T) {
	cause := errors.New("loss is NaN")
	changes := []SettingChange{{"batch", "2", "4"}, {"lr", "0.001", "0.02"}}
	for _, m := range []interface{ String() string }{
		ResumedNotice{Changes: changes},
		InterruptedNotice{Checkpoint: "/r/last.ckpt", Step: 7},
		FallbackNotice{Setting: "resident", Value: "auto", Reason: "no data transfer; keeping the training state in host memory"},
		errorText{&ResumeConflictError{Refused: changes}},
		errorText{&DivergedError{Step: 3, Err: cause, LR: 0.001}},
		errorText{&DivergedError{Step: 3, Err: cause, LR: 0.001, Checkpoint: "/r/last.ckpt", CheckpointStep: 2, Dir: "/r"}},
		errorText{&NoBatchError{Examples: 3, Batch: 4, Processes: 2}},
		errorText{&RunExistsError{Dir: "/r"}},
		errorText{&RanksError{Checkpoint: "/r/last.ckpt", Was: 2, Now: 1, Batch: 4}},
		errorText{&RankMismatchError{Rank: 1, What: "settings"}},
		errorText{&LeftoverCheckpointsError{Dir: "/r", Found: []string{"best.ckpt"}}},
		errorText{&BaseDigestError{Path: "/m.onnx", Checkpoint: "last.ckpt", Got: strings.Repeat("a", 64), Recorded: strings.Repeat("b", 64)}},
		errorText{&BaseDigestError{Path: "/m.onnx", Checkpoint: "last.ckpt", Got: "ab", Recorded: ""}}, // a caller's short digests
		errorText{&BaseModelError{Err: cause}},
		errorText{&BaseModelError{Err: cause, Given: true}},
		errorText{CheckAccumulate(4, "on", nil)},
		errorText{CheckAccumulate(4, "off", &RegularizerConfig{Alpha: 1})},
		errorText{CheckEMA(2)},
		errorText{CheckSampleBy("class", 0.1, true)},
		errorText{&ValSplitExistsError{Root: "/d", Split: "val"}},
	} {
		if s := m.String(); s == "" || strings.Contains(s, "--") {
			t.Errorf("%T: %q", m, s)
		}
	}
}

type errorText struct{ error }

func (e errorText) String() string { return e.Error() }

// Without Hooks.Notice a notice is a line of Log; with it, the typed
// value goes there and Log gets nothing.
func TestNoticesGoToNoticeOrLog(t *testing.T) {
	var log strings.Builder
	n := InterruptedNotice{Checkpoint: "/r/last.ckpt", Step: 7}
	Hooks{Log: &log}.notice(n)
	if want := "interrupted: saved /r/last.ckpt at step 7; continue with resume\n"; log.String() != want {
		t.Errorf("Log got %q, want %q", log.String(), want)
	}
	log.Reset()
	var got []Notice
	Hooks{Log: &log, Notice: func(n Notice) { got = append(got, n) }}.notice(n)
	if len(got) != 1 || got[0] != n || log.Len() != 0 {
		t.Errorf("Notice got %v, Log %q", got, log.String())
	}
	Hooks{}.notice(n) // neither: dropped
}
