#!/usr/bin/python3
"""Side-by-side train-step comparison: alternating runs, medians.

    /usr/bin/python3 bench/trainstep/compare.py --models mobilenetv2,resnet18 --threads 1,2 \\
        --rounds 5 [--steps 6 --warmup 2] [--segtune-bin PATH] [--segtune-args '--no-mem-pattern']

For every (model, threads) pair it runs the PyTorch side (torch_step.py) and
the segtune side (the Go program in this directory, built once with `go build`
unless --segtune-bin names a binary) one after the other, --rounds times, so
that slow phases of a shared machine hit both sides alike. Each run reports
the median of its --steps steps; the table gives, per side, the median over the
rounds [min-max], the median CPU time per step (user+system over the timed
steps; at one thread far less sensitive to other load than the wall time),
the median peak RSS, and segtune / PyTorch of the medians.
--json writes every run as well. --variant NAME=ARGS (repeatable) adds more
segtune sides with extra flags (e.g. --variant pattern=--mem-pattern), and
--binary 'NAME=PATH [ARGS]' a side run by another build of bench/trainstep (e.g. an
older commit's), to compare settings or versions under the same load.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TRANSFORMERS = ("segformer", "convnext_upernet", "swin", "unet_gn")  # scripts/gen_transformer_models.py
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def run_json(cmd):
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mobilenetv2",
                    help="comma-separated: mobilenetv2, mobilenetv3, resnet18, or a family of "
                         "scripts/gen_transformer_models.py (segformer, convnext_upernet, swin, unet_gn; "
                         "its opset-17 dynamic export)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--segtune-bin", help="prebuilt bench/trainstep binary (default: go build it)")
    ap.add_argument("--segtune-args", default="", help="extra flags for the segtune side")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                    help="another segtune side with these extra flags")
    ap.add_argument("--binary", action="append", default=[], metavar="NAME=PATH [ARGS]",
                    help="another segtune side: a different build of bench/trainstep (e.g. an older commit), with extra flags")
    ap.add_argument("--no-torch", action="store_true", help="segtune sides only")
    ap.add_argument("--json", help="also write every run to this file")
    args = ap.parse_args()

    binary = args.segtune_bin
    if not binary:
        binary = os.path.join(tempfile.mkdtemp(prefix="trainstep"), "trainstep")
        subprocess.run(["go", "build", "-o", binary, "./bench/trainstep"], cwd=ROOT, check=True)
    base = shlex.split(args.segtune_args)
    sides = [] if args.no_torch else [("pytorch", None, None)]
    sides.append(("segtune", binary, base))
    for v in args.variant:
        name, _, extra = v.partition("=")
        sides.append((name, binary, base + shlex.split(extra)))
    for v in args.binary:
        name, _, spec = v.partition("=")
        path, *extra = shlex.split(spec)
        sides.append((name, os.path.abspath(path), base + extra))

    runs = []
    rows = []
    for model in args.models.split(","):
        for threads in [int(t) for t in args.threads.split(",")]:
            got = {side[0]: [] for side in sides}
            common = ["--batch", str(args.batch), "--size", str(args.size), "--threads", str(threads),
                      "--steps", str(args.steps), "--warmup", str(args.warmup), "--json"]
            for r in range(args.rounds):
                for name, exe, extra in sides:
                    if exe is None:
                        cmd = [sys.executable, os.path.join(HERE, "torch_step.py"), "--model", model] + common
                    else:
                        onnx = os.path.join("testdata", "generated", f"deeplabv3plus_{model}.onnx")
                        if model in TRANSFORMERS:
                            onnx = os.path.join("testdata", "generated", "transformers", f"{model}_op17_dynamic.onnx")
                        cmd = [exe, "--model", onnx] + common + extra
                    res = run_json(cmd)
                    res.update(side=name, round=r, command=" ".join(cmd))
                    runs.append(res)
                    got[name].append(res)
                    print(f"{model} threads {threads} round {r} {name}: {res['median_ms']:.1f} ms, "
                          f"peak RSS {res['peak_rss_mib']:.0f} MiB", file=sys.stderr, flush=True)
            ref = statistics.median(x["median_ms"] for x in got[sides[0][0]])
            for name, _, _ in sides:
                ms = [x["median_ms"] for x in got[name]]
                med = statistics.median(ms)
                rss = statistics.median(x["peak_rss_mib"] for x in got[name])
                cpu = statistics.median(x.get("cpu_ms_per_step", 0) for x in got[name])
                rows.append((model, threads, name, med, min(ms), max(ms), cpu, rss, med / ref))
    print(f"| model | threads | side | median ms/step [min–max] | CPU ms/step | peak RSS MiB | / {sides[0][0]} |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for model, threads, name, med, lo, hi, cpu, rss, ratio in rows:
        print(f"| {model} | {threads} | {name} | {med:.1f} [{lo:.1f}–{hi:.1f}] | {cpu:.1f} | {rss:.0f} | {ratio:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
