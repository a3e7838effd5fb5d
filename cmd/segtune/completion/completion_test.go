package completion

import (
	"errors"
	"strings"
	"testing"
)

func TestScript(t *testing.T) {
	fish := func() (string, error) { return "complete -c segtune", nil }
	for shell, want := range map[string]string{"bash": "complete -o bashdefault", "zsh": "compdef _segtune segtune", "fish": "complete -c segtune"} {
		s, err := Script(shell, fish)
		if err != nil || !strings.Contains(s, want) {
			t.Errorf("%s: %v, script without %q", shell, err, want)
		}
	}
	if _, err := Script("tcsh", fish); err == nil || err.Error() != `no script for "tcsh": want bash, zsh or fish` {
		t.Errorf("tcsh: %v", err)
	}
	broken := errors.New("no commands")
	if _, err := Script("fish", func() (string, error) { return "", broken }); !errors.Is(err, broken) {
		t.Errorf("fish's error: %v", err)
	}
}
