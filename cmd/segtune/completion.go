package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/cmd/segtune/completion"
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
			script, err := completion.Script(c.Args().First(), c.App.ToFishCompletion)
			if err != nil {
				return cli.Exit("completion: "+err.Error(), 2)
			}
			_, err = fmt.Fprint(os.Stdout, script)
			return err
		},
	}
}
