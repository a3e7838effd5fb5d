package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "write a checkpoint's refined network as a clean ONNX inference model",
		Description: "The model has the base model's inputs and outputs (with the new class count if the\n" +
			"run replaced the classifier), the trained weights, and nothing of the training graph.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "checkpoint", Aliases: []string{"c"}, Required: true, Usage: "checkpoint (e.g. OUT/best.ckpt)"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "ONNX file to write"},
			&cli.StringFlag{Name: "model", Usage: "base model, if it moved since training"},
		},
		Action: func(c *cli.Context) error {
			m, err := finetune.Export(c.String("checkpoint"), c.String("model"), c.String("out"))
			if err != nil {
				return err
			}
			// Prove the file loads in ONNX Runtime before telling the user it is ready.
			if err := initRuntime(c); err == nil {
				data, _ := m.Marshal()
				s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
				if err != nil {
					return fmt.Errorf("%s was written but ONNX Runtime rejects it: %w", c.String("out"), err)
				}
				s.Close()
			}
			s := m.Summary()
			fmt.Printf("wrote %s: %d parameters, inputs %s, outputs %s\n", c.String("out"), s.Parameters, describe(s.Inputs), describe(s.Outputs))
			return nil
		},
	}
}

func describe(vs []onnx.Value) string {
	out := ""
	for i, v := range vs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s %s", v.Name, shapeOf(v.Dims))
	}
	return out
}

func shapeOf(dims []string) string {
	return "[" + strings.Join(dims, ",") + "]"
}
