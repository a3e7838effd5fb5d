package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCompletion: each shell's script is printed (bash's and zsh's parse
// in their shells where those are installed), an unknown shell is refused
// naming the choices, and the words the scripts ask segtune for are its
// commands, a command's subcommands and its flags.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "complete -o bashdefault", "zsh": "compdef _segtune segtune", "fish": "complete -c segtune"} {
		out, err := runCLI(t, "completion", shell)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("completion %s: %v; %.200q lacks %q", shell, err, out, want)
			continue
		}
		if shell == "fish" {
			continue
		}
		if _, err := exec.LookPath(shell); err != nil {
			t.Logf("no %s here: its script is not parsed", shell)
			continue
		}
		if b, err := exec.Command(shell, "-n", "-c", out).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v: %s", shell, err, b)
		}
	}
	if _, err := runCLI(t, "completion", "tcsh"); err == nil || !strings.Contains(err.Error(), "want bash, zsh or fish") {
		t.Errorf("completion tcsh: %v", err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"finetune", "segment", "completion"}},
		{[]string{"model"}, []string{"list", "new"}},
		{[]string{"finetune", "--l"}, []string{"--lr", "--label-map"}},
	} {
		// urfave/cli reads the word before the completion flag from
		// os.Args, as a shell's call would give it.
		args := append(c.args, "--generate-bash-completion")
		saved := os.Args
		os.Args = append([]string{"segtune"}, args...)
		out, err := runCLI(t, args...)
		os.Args = saved
		if err != nil {
			t.Fatal(err)
		}
		words := strings.Fields(out)
		for _, w := range c.want {
			if !strings.Contains(" "+strings.Join(words, " ")+" ", " "+w+" ") && !strings.Contains(out, w+":") {
				t.Errorf("completing %q: %q lacks %s", c.args, words, w)
			}
		}
	}
}
