package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/cliflag"
	progressui "github.com/segtune/segtune/internal/progress"
	"github.com/segtune/segtune/resolve"
)

// Models by name. Every command's --model accepts a registry name
// (`segtune model list`) as well as a path: resolveModelFlags wraps the
// commands so that the flag holds the file's path by the time they run.

// resolveModelFlags makes the --model flag of every command in cmds (and
// their subcommands) accept a known model's name or a bucket URL: a
// Before hook replaces the value by the model's file (resolveModel).
func resolveModelFlags(cmds []*cli.Command) {
	for _, cmd := range cmds {
		resolveModelFlags(cmd.Subcommands)
		var flag *cli.StringFlag
		for _, f := range cmd.Flags {
			if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "model" {
				flag = sf
			}
		}
		if flag == nil {
			continue
		}
		flag.Usage += " (or a known model's name, see segtune model list, hf:OWNER/REPO[/FILE.onnx][@REVISION], an https:// URL, or an s3://, gs:// or azblob:// URL)"
		if flag.Destination == nil {
			flag.Destination = new(string)
		}
		model := flag.Destination
		cliflag.Before(cmd, func(c *cli.Context) error {
			if *model == "" {
				return nil
			}
			path, err := resolveModel(c, *model)
			if err != nil || path == *model {
				return err
			}
			return c.Set("model", path)
		})
	}
}

// resolveModel returns the local file of a model given as a path, a
// registry name or a URL (resolve.Model), its downloads shown on the
// terminal (byte bars, not with --quiet or --json): what every command's
// --model, and info's argument, accept. Errors name --model.
func resolveModel(c *cli.Context, v string) (string, error) {
	ui := resolve.TerminalUI(noticeWriter(c), !c.IsSet("json") && progressui.Shown(globals(c).Quiet))
	path, err := resolve.Model(resolve.WithDownloadUI(c.Context, ui), v)
	return path, withFlagNames(err)
}

// warnMetadata says, whatever --quiet, that a model's embedded settings
// were unusable and are ignored.
func warnMetadata(err error) { fmt.Fprintln(os.Stderr, "segtune: "+resolve.MetadataWarning(err)) }
