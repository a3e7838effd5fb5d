#!/usr/bin/python3
"""Whole fine-tuning epoch, segtune's CLI against a PyTorch loop: alternating runs, medians.

    /usr/bin/python3 bench/epoch/compare.py [--rounds 3] [--threads 2] [--workers 1] \\
        [--limit N] [--val-limit M] [--json runs.json]

Per round and thread count it runs, one after the other, as separate processes:

* segtune: `segtune finetune --epochs 1` (bin/segtune, built once into a temp
  folder unless --segtune-bin names one) on the generated DeepLabV3+
  (testdata/generated/deeplabv3plus_<model>.onnx), CamVid person vs rest
  (--label-map '9,10:1;11:255;*:0'), --crop 240x320 --batch 4, AdamW at
  lr 1e-4 with its default weight decay 0.01 and schedule, its default
  augmentation (scale 0.5-2, crop, flip), x/127.5-1, validation on val,
  into a fresh --out folder;
* pytorch: torch_epoch.py (this folder), the same loop in PyTorch with a
  DataLoader of --workers processes and torch.set_num_threads(--threads).

Each run is timed from process start to exit: wall time, user+system CPU time
(os.wait4's rusage of the process and its reaped children, i.e. DataLoader
workers included), ru_maxrss (the largest single process, as /usr/bin/time
reports) and the peak of the summed PSS of the process tree, sampled every
--sample seconds (DataLoader workers share pages with their parent; PSS
splits those shares, RSS counts them in each process).

The segtune side's phases come from its output folder: its run lock is
created at start-up, config.json right after setup (data decoded, training
graph compiled, session opened), metrics.jsonl gives the epoch's training
time and each step's compute time, last.ckpt is written after validation,
then curves.png, model.onnx (export) and samples.png (contact sheet), each
file's mtime marking the end of its phase. The sampler also reads the tree's
CPU time (/proc/PID/stat), so each phase gets its CPU seconds as well
(interpolated between samples; steadier than wall time on a loaded machine).

--limit N trains on the first N training images (sorted by name), --val-limit M
validates on the first M val images (symlinks in a temp data root); the
default is the issue's setting, all of CamVid train (367, 91 steps) and val (101).
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LABEL_MAP = "9,10:1;11:255;*:0"  # CamVid Pedestrian + Bicyclist -> person, Unlabelled ignored


def limited_root(src, limit, val_limit):
    """A data root of symlinks to the first files of each split (by sorted image name)."""
    root = tempfile.mkdtemp(prefix="epochdata")
    for split, n in (("train", limit), ("val", val_limit)):
        imgs = sorted(os.listdir(os.path.join(src, "images", split)))
        if n:
            imgs = imgs[:n]
        masks = {os.path.splitext(f)[0]: f for f in os.listdir(os.path.join(src, "masks", split))}
        for kind in ("images", "masks"):
            os.makedirs(os.path.join(root, kind, split))
        for f in imgs:
            stem = os.path.splitext(f)[0]
            os.symlink(os.path.join(src, "images", split, f), os.path.join(root, "images", split, f))
            if stem in masks:
                m = masks[stem]
                os.symlink(os.path.join(src, "masks", split, m), os.path.join(root, "masks", split, m))
    return root


def tree(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pids):
    """utime+stime of pids, and of the first one's reaped children (cutime+cstime), seconds."""
    total = 0
    for i, pid in enumerate(pids):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
        if i == 0:
            total += int(fields[13]) + int(fields[14])  # cutime, cstime
    return total / TICK


def run(cmd, sample, env=None):
    """Runs cmd; returns wall s, CPU s, ru_maxrss MiB, peak tree PSS MiB, stdout, start time,
    and samples (time, CPU s of the tree so far)."""
    start = time.time()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = [0]
    cpu = [(start, 0.0)]
    done = threading.Event()

    def sampler():
        while not done.wait(sample):
            pids = tree(p.pid)
            peak[0] = max(peak[0], sum(pss_kib(q) for q in pids))
            cpu.append((time.time(), cpu_s(pids)))
    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    out, err = [], []
    readers = [threading.Thread(target=lambda: out.append(p.stdout.read())),
               threading.Thread(target=lambda: err.append(p.stderr.read()))]
    for r in readers:
        r.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    for r in readers:
        r.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{err[0][-3000:]}")
    cpu.append((start + wall, ru.ru_utime + ru.ru_stime))
    return dict(wall_s=wall, cpu_s=ru.ru_utime + ru.ru_stime, user_s=ru.ru_utime, sys_s=ru.ru_stime,
                peak_rss_mib=ru.ru_maxrss / 1024, peak_pss_mib=peak[0] / 1024), out[0], start, cpu


def cpu_at(samples, t):
    """CPU seconds used by time t, interpolated between samples."""
    for (t0, c0), (t1, c1) in zip(samples, samples[1:]):
        if t <= t1:
            return c0 if t1 <= t0 else c0 + (c1 - c0) * (max(t, t0) - t0) / (t1 - t0)
    return samples[-1][1]


def cpu_phases(samples, start, ends):
    """CPU seconds per phase, ends: ordered (name, absolute end time)."""
    out, prev = {}, 0.0
    for name, t in ends:
        c = cpu_at(samples, t)
        out[name] = round(c - prev, 2)
        prev = c
    return out


def segtune_phases(out_dir, start, end):
    """Phase durations from the output folder's files (see the module doc)."""
    mt = {f: os.stat(os.path.join(out_dir, f)).st_mtime for f in
          (".segtune.lock", "config.json", "last.ckpt", "curves.png", "model.onnx", "samples.png")
          if os.path.exists(os.path.join(out_dir, f))}
    for f, prev in (("curves.png", "last.ckpt"), ("model.onnx", "curves.png"), ("samples.png", "model.onnx")):
        mt.setdefault(f, mt[prev])  # not written (a warning on stderr): an empty phase
    recs = [json.loads(line) for line in open(os.path.join(out_dir, "metrics.jsonl"))]
    steps = [r["seconds"] for r in recs if r["kind"] == "step"]
    ep = [r for r in recs if r["kind"] == "epoch"][-1]
    train_end = mt["config.json"] + ep["seconds"]
    ends = [("startup", mt[".segtune.lock"]), ("setup", mt["config.json"]), ("train", train_end),
            ("validation+checkpoint", mt["last.ckpt"]), ("history+curves", mt["curves.png"]),
            ("export", mt["model.onnx"]), ("samples", mt["samples.png"]), ("exit", end)]
    ph = {
        "startup": mt[".segtune.lock"] - start,
        "setup": mt["config.json"] - mt[".segtune.lock"],
        "train": ep["seconds"],
        "validation+checkpoint": mt["last.ckpt"] - train_end,
        "history+curves": mt["curves.png"] - mt["last.ckpt"],
        "export": mt["model.onnx"] - mt["curves.png"],
        "samples": mt["samples.png"] - mt["model.onnx"],
        "exit": end - mt["samples.png"],
    }
    return ({k: round(v, 3) for k, v in ph.items()}, ends, dict(
        steps=len(steps), step_median_s=round(statistics.median(steps), 3), step_sum_s=round(sum(steps), 3),
        train_wait_s=round(ep["seconds"] - sum(steps), 3), train_loss=ep["loss"], val_miou=ep.get("val_miou")))


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/work/shared/assets/data/camvid")
    ap.add_argument("--model", default="mobilenetv2", help="mobilenetv2, mobilenetv3 or resnet18 (testdata/generated)")
    ap.add_argument("--threads", default="2", help="comma-separated thread counts (ORT intra-op = torch.set_num_threads)")
    ap.add_argument("--workers", type=int, default=1, help="PyTorch DataLoader worker processes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=0, help="train on the first N training images (0: all)")
    ap.add_argument("--val-limit", type=int, default=0, help="validate on the first M val images (0: all)")
    ap.add_argument("--segtune-bin", help="prebuilt bin/segtune (default: go build it)")
    ap.add_argument("--segtune-args", default="", help="extra flags for segtune finetune")
    ap.add_argument("--torch-args", default="", help="extra flags for torch_epoch.py")
    ap.add_argument("--sample", type=float, default=0.5, help="PSS sampling interval, seconds")
    ap.add_argument("--json", help="also write every run to this file")
    args = ap.parse_args()

    binary = args.segtune_bin
    tmp = tempfile.mkdtemp(prefix="epochbench")
    if not binary:
        binary = os.path.join(tmp, "segtune")
        subprocess.run(["go", "build", "-o", binary, "./cmd/segtune"], cwd=ROOT, check=True)
    data = args.data
    if args.limit or args.val_limit:
        data = limited_root(args.data, args.limit, args.val_limit)
    onnx = os.path.join(ROOT, "testdata", "generated", f"deeplabv3plus_{args.model}.onnx")
    runs = []
    try:
        for threads in [int(t) for t in args.threads.split(",")]:
            for r in range(args.rounds):
                for side in ("segtune", "pytorch"):
                    out_dir = os.path.join(tmp, f"{side}-{threads}-{r}")
                    if side == "segtune":
                        cmd = [binary, "finetune", "--model", onnx, "--data", data, "--out", out_dir,
                               "--label-map", LABEL_MAP, "--class-names", "background,person",
                               "--value-scale", "0.00784313725490196", "--value-offset", "-1",
                               "--crop", "240x320", "--batch", "4", "--epochs", "1",
                               "--optimizer", "adamw", "--lr", "1e-4", "--weight-decay", "0.01",
                               "--threads", str(threads), "--seed", "1", "--json"] + shlex.split(args.segtune_args)
                    else:
                        cmd = [sys.executable, os.path.join(HERE, "torch_epoch.py"), "--data", data,
                               "--out", out_dir, "--model", args.model, "--label-map", LABEL_MAP,
                               "--crop", "240x320", "--batch", "4", "--lr", "1e-4", "--weight-decay", "0.01",
                               "--threads", str(threads), "--workers", str(args.workers), "--seed", "1",
                               "--json"] + shlex.split(args.torch_args)
                    load = os.getloadavg()[0]
                    res, stdout, start, cpu = run(cmd, args.sample)
                    end = start + res["wall_s"]
                    res.update(side=side, threads=threads, round=r, load_before=round(load, 2),
                               load_after=round(os.getloadavg()[0], 2), command=" ".join(shlex.quote(c) for c in cmd))
                    if side == "segtune":
                        res["phases_s"], ends, extra = segtune_phases(out_dir, start, end)
                        res.update(extra)
                    else:
                        tj = json.loads(stdout[stdout.index("{"):])
                        ph = tj["phases_s"]
                        inner = sum(ph.values())
                        res["phases_s"] = dict(ph, exit=round(res["wall_s"] - inner, 3))  # interpreter start + teardown
                        mk = tj["marks"]
                        ends = [(k, mk[k]) for k in ("imports", "setup", "train", "validation", "checkpoint")]
                        ends.append(("exit", end))
                        for k in ("steps", "step_median_s", "step_sum_s", "train_wait_s", "train_loss", "val_miou"):
                            res[k] = tj[k]
                    res["phases_cpu_s"] = cpu_phases(cpu, start, ends)
                    res["cpu_samples"] = [(round(t - start, 2), round(c, 2)) for t, c in cpu]
                    runs.append(res)
                    shutil.rmtree(out_dir, ignore_errors=True)
                    print(f"threads {threads} round {r} {side}: {res['wall_s']:.1f} s wall, {res['cpu_s']:.1f} s CPU, "
                          f"RSS {res['peak_rss_mib']:.0f} MiB, PSS {res['peak_pss_mib']:.0f} MiB, load {load:.1f}; "
                          f"phases {res['phases_s']}", file=sys.stderr, flush=True)
    finally:
        if data != args.data:
            shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)

    for threads in sorted({x["threads"] for x in runs}):
        got = {s: [x for x in runs if x["threads"] == threads and x["side"] == s] for s in ("pytorch", "segtune")}
        ref_wall = med([x["wall_s"] for x in got["pytorch"]])
        ref_cpu = med([x["cpu_s"] for x in got["pytorch"]])
        mine = got["pytorch"] + got["segtune"]
        print(f"\nthreads {threads}, {got['segtune'][0]['steps']} steps, load {min(x['load_before'] for x in mine):.1f}–"
              f"{max(x['load_after'] for x in mine):.1f}")
        print("| side | wall s [min–max] | CPU s [min–max] | peak RSS MiB | peak PSS MiB (tree) | wall / PyTorch | CPU / PyTorch |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for s in ("pytorch", "segtune"):
            w = [x["wall_s"] for x in got[s]]
            c = [x["cpu_s"] for x in got[s]]
            print(f"| {s} | {med(w):.1f} [{min(w):.1f}–{max(w):.1f}] | {med(c):.1f} [{min(c):.1f}–{max(c):.1f}] | "
                  f"{med([x['peak_rss_mib'] for x in got[s]]):.0f} | {med([x['peak_pss_mib'] for x in got[s]]):.0f} | "
                  f"{med(w) / ref_wall:.2f} | {med(c) / ref_cpu:.2f} |")
        for s in ("pytorch", "segtune"):
            keys = list(got[s][0]["phases_s"])
            print(f"{s} phases, median s: " + ", ".join(f"{k} {med([x['phases_s'][k] for x in got[s]]):.1f}" for k in keys)
                  + f"; step median {med([x['step_median_s'] for x in got[s]]):.2f} s, waiting for batches "
                  f"{med([x['train_wait_s'] for x in got[s]]):.1f} s")
            print(f"{s} CPU by phase, median s: " + ", ".join(
                f"{k} {med([x['phases_cpu_s'][k] for x in got[s]]):.1f}" for k in got[s][0]["phases_cpu_s"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
