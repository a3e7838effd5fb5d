package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// Shell completion: each script asks segtune itself for the words that
// may follow (urfave/cli's hidden --generate-bash-completion flag, which
// EnableBashCompletion turns on), so it stays true as commands and flags
// change. The scripts run the words typed so far as an array, never
// through eval.
const (
	bashCompletion = `# segtune completion for bash: source <(segtune completion bash)
_segtune_complete() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  local words=("${COMP_WORDS[@]:0:COMP_CWORD}")
  [[ "$cur" == -* ]] && words+=("$cur")
  local IFS=$'\n'
  COMPREPLY=($(compgen -W "$("${words[@]}" --generate-bash-completion 2>/dev/null)" -- "$cur"))
}
complete -o bashdefault -o default -F _segtune_complete segtune
`
	zshCompletion = `#compdef segtune
# segtune completion for zsh: source <(segtune completion zsh)
_segtune() {
  local -a opts
  local cur=${words[-1]}
  local -a typed=(${words[@]:0:#words[@]-1})
  [[ "$cur" == -* ]] && typed+=("$cur")
  opts=("${(@f)$("${typed[@]}" --generate-bash-completion 2>/dev/null)}")
  if [[ -n "${opts[1]}" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _segtune segtune
`
)

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: "Completes commands and flags as you type. To install it for your shell:\n" +
			"  bash: echo 'source <(segtune completion bash)' >> ~/.bashrc\n" +
			"  zsh:  echo 'source <(segtune completion zsh)' >> ~/.zshrc\n" +
			"  fish: segtune completion fish > ~/.config/fish/completions/segtune.fish",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("completion: name the shell: bash, zsh or fish", 2)
			}
			var script string
			switch shell := c.Args().First(); shell {
			case "bash":
				script = bashCompletion
			case "zsh":
				script = zshCompletion
			case "fish":
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return err
				}
				script = s
			default:
				return cli.Exit(fmt.Sprintf("completion: no script for %q: want bash, zsh or fish", shell), 2)
			}
			_, err := fmt.Fprint(os.Stdout, script)
			return err
		},
	}
}
