package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/cmd/segtune/doctor"
)

func doctorCommand() *cli.Command {
	var (
		model, size string
		asJSON      bool
	)
	return &cli.Command{
		Name:  "doctor",
		Usage: "report ONNX Runtime, its providers, the CUDA libraries and GPUs, and where a model's nodes run",
		Description: "Loads ONNX Runtime as --device cuda would (the CUDA build `make ort-cuda` installs comes first),\n" +
			"lists the providers, the CUDA 13 and cuDNN 9 libraries found (with paths) and missing, the NVIDIA\n" +
			"driver and GPUs, and says whether --device cuda would run on the GPU or why not. With --model,\n" +
			"it runs the model's inference graph and its training graph once on the CUDA provider and reports\n" +
			"the nodes ONNX Runtime placed on the CPU. It also says segtune's memory limit and which bound set it.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "ONNX model whose inference and training graphs are placed on the GPU", Destination: &model},
			&cli.StringFlag{Name: "size", Value: "257x257", Usage: "HxW for the model's dynamic spatial dimensions", Destination: &size},
			jsonFlag(&asJSON),
		},
		Action: func(c *cli.Context) error {
			r := doctor.Run(globals(c).ORTLib, flagOf)
			if model != "" {
				r.Place(model, size, flagOf)
			}
			if asJSON {
				return printJSON(os.Stdout, r)
			}
			r.WriteText(os.Stdout)
			return nil
		},
	}
}
