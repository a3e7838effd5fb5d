// Package completion holds segtune's shell completion scripts.
package completion

import "fmt"

// Each script asks segtune itself for the words that
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

// Script is the completion script for shell: bash, zsh, or fish, whose
// script fish makes (urfave/cli writes it from the commands).
func Script(shell string, fish func() (string, error)) (string, error) {
	switch shell {
	case "bash":
		return bashCompletion, nil
	case "zsh":
		return zshCompletion, nil
	case "fish":
		return fish()
	}
	return "", fmt.Errorf("no script for %q: want bash, zsh or fish", shell)
}
