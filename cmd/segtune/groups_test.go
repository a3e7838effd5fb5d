package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/runtime"
)

// parseGroup runs a command of flags with args and then check on the
// parsed context, and returns its error.
func parseGroup(t *testing.T, flags []cli.Flag, check func(c *cli.Context) error, args ...string) error {
	t.Helper()
	app := &cli.App{Name: "segtune", ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{{Name: "cmd", Flags: flags, Action: check}}}
	return app.Run(append([]string{"segtune", "cmd"}, args...))
}

// The preprocessing flags land in imageio's Preprocess and OutputSpec,
// with --size and --scale implying their resize policy unless --resize
// says otherwise.
func TestPreprocessFlagsBindIntoImageio(t *testing.T) {
	var o preprocessOptions
	var got imageio.Sidecar
	err := parseGroup(t, preprocessFlags(&o), func(c *cli.Context) (err error) { got, err = o.Sidecar(); return err },
		"--size", "4x6", "--resize", "letterbox", "--scale", "0.5", "--multiple-of", "8", "--plus-one", "--interpolation", "nearest",
		"--bgr", "--nhwc", "--mean", "0.1,0.2,0.3", "--std", "1,2,3", "--value-scale", "2", "--value-offset", "-1",
		"--output-layout", "nhwc", "--threshold", "0.3", "--preprocess", "p.json")
	if err != nil {
		t.Fatal(err)
	}
	want := imageio.Preprocess{Height: 4, Width: 6, Resize: imageio.ResizeLetterbox, ScaleFactor: 0.5, MultipleOf: 8, PlusOne: true,
		Interpolation: "nearest", ChannelOrder: imageio.BGR, Layout: imageio.NHWC, Mean: []float64{0.1, 0.2, 0.3}, Std: []float64{1, 2, 3},
		ValueScale: 2, ValueOffset: -1}
	if !reflect.DeepEqual(*got.Preprocess, want) || *got.Output != (imageio.OutputSpec{Layout: imageio.NHWC, Threshold: 0.3}) || o.File != "p.json" {
		t.Errorf("got %+v %+v (file %q)\nwant %+v", *got.Preprocess, *got.Output, o.File, want)
	}
	for args, resize := range map[string]imageio.ResizePolicy{"--size 4x6": imageio.ResizeStretch, "--scale 2": imageio.ResizeScale, "--size 4x6 --scale 2": imageio.ResizeScale} {
		var o preprocessOptions
		err := parseGroup(t, preprocessFlags(&o), func(c *cli.Context) (err error) { got, err = o.Sidecar(); return err }, strings.Fields(args)...)
		if err != nil || got.Preprocess.Resize != resize || got.Output != nil {
			t.Errorf("%s: %v, resize %q output %v, want %q and no output spec", args, err, got.Preprocess.Resize, got.Output, resize)
		}
	}
}

// finetune's dense flags ("val-") give inference's Dense, and name their
// own flags when refused.
func TestDenseFlagsBindWithPrefix(t *testing.T) {
	var o denseOptions
	var d *inference.Dense
	dense := func(*cli.Context) (err error) { d, err = o.dense(); return err }
	if err := parseGroup(t, denseFlags(&o, "val-"), dense, "--val-tile", "8x4", "--val-overlap", "0.5", "--val-tta", "flip"); err != nil ||
		d == nil || d.TileHeight != 8 || d.TileWidth != 4 || d.Overlap != 0.5 || !d.Flip {
		t.Errorf("%v %+v", err, d)
	}
	o = denseOptions{}
	if err := parseGroup(t, denseFlags(&o, "val-"), dense); err != nil || d != nil {
		t.Errorf("no dense flags: %v %+v", err, d)
	}
	o = denseOptions{}
	if err := parseGroup(t, denseFlags(&o, "val-"), dense, "--val-overlap", "0.5"); err == nil || err.Error() != "--val-overlap: needs --val-tile" {
		t.Errorf("overlap alone: %v", err)
	}
}

// The data layout, shard and session groups: values land in their
// structs, --coco-crowd and --skip-existing as the library needs them,
// and a --threads out of runtime's range stops the command before its
// action.
func TestDataShardAndSessionGroups(t *testing.T) {
	var l dataLayout
	var s shardOptions
	var r runtime.Options
	ran := false
	flags := append(append(dataLayoutFlags(&l, "--data"), shardFlags(&s)...), sessionFlags(&r)...)
	err := parseGroup(t, flags, func(*cli.Context) error {
		ran = true
		opt, err := l.options()
		if err != nil || opt.Format != "coco" || opt.Split != "val" || !opt.CrowdAsClass {
			t.Errorf("layout %+v: %v", opt, err)
		}
		if s.Shard != "1/3" || !s.SkipGiven || s.SkipExisting || r.Device != "auto" || r.Threads != 2 {
			t.Errorf("shard %+v, session %+v", s, r)
		}
		return nil
	}, "--format", "coco", "--split", "val", "--coco-crowd", "class", "--shard", "1/3", "--skip-existing=false", "--device", "auto", "--threads", "2")
	if err != nil || !ran {
		t.Fatalf("%v (ran %v)", err, ran)
	}
	ran = false
	err = parseGroup(t, sessionFlags(new(runtime.Options)), func(*cli.Context) error { ran = true; return nil }, "--threads", "-1")
	if err == nil || !strings.HasPrefix(err.Error(), "--threads -1: must be from 1 to") || ran {
		t.Errorf("--threads -1: %v (action ran: %v)", err, ran)
	}
	if err := parseGroup(t, dataLayoutFlags(&l, "--data"), func(*cli.Context) error { _, err := l.options(); return withFlagNames(err) }, "--coco-crowd", "maybe"); err == nil ||
		err.Error() != `--coco-crowd "maybe": must be ignore or class` {
		t.Errorf("--coco-crowd maybe: %v", err)
	}
}
