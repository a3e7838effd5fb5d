#!/usr/bin/python3
"""Turns scripts/gpu-check.sh's results.jsonl into results.json and a markdown table.

    python3 bench/gpu/report.py OUT/results.jsonl --json OUT/results.json --md OUT/results.md

The step table has one row per model, batch and precision: PyTorch eager's
median ms/step, each segtune variant's, and the ratio of the fastest segtune
variant to PyTorch (below 1.0 is faster); GPU memory is the peak of
nvidia-smi's memory.used over each process, less the reading before it
(CUDA context included on both sides), with torch.cuda.max_memory_allocated
beside it. Runs that failed or were not run show their status; a time
marked * includes steps whose gradient was not finite (the update skipped).
The levers table lists each segtune variant (ConvGrad classes, CUDA graphs
as captured) against the baseline resident step and PyTorch; the gradient
table each precision's error against float64, segtune's with ConvGrad off
and on, beside PyTorch's.
"""
import argparse
import json
import sys

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    args = ap.parse_args()
    runs = [json.loads(line) for line in open(args.jsonl) if line.strip()]

    steps = {}
    variants = []  # segtune's, in the order the check ran them
    for r in runs:
        if r.get("kind") not in ("pytorch", "segtune"):
            continue
        model, batch, prec, variant = r["label"].split()
        steps.setdefault((model, batch, prec), {})[variant] = r
        if r["kind"] == "segtune" and variant not in variants:
            variants.append(variant)

    def ms(r):
        if r is None:
            return "–"
        if r.get("status") != "ok" or "median_ms" not in r:
            return r.get("status", "?")
        return f"{r['median_ms']:.1f}" + ("*" if r.get("skipped_steps") else "")

    def mib(r, key):
        return str(r[key]) if r and r.get(key) is not None else "–"

    device = next((r.get("device_name") for r in runs if r.get("kind") == "device"), None) or \
        next((r.get("gpu") or r.get("device") for r in runs if r.get("kind") == "pytorch" and r.get("status") == "ok"), None) or "?"
    lines = [f"# GPU check: {device}", "",
             "Training step (forward, backward, SGD momentum update), median ms; ratio = fastest segtune / PyTorch.", "",
             "| model | batch | precision | PyTorch | " + " | ".join(variants) + " | ratio | GPU MiB segtune / PyTorch (smi) | torch max_allocated MiB |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in variants) + " | --- | --- | --- |"]
    table = []
    for (model, batch, prec), v in steps.items():
        pt = v.get("pytorch")
        seg = [v[k] for k in variants if k in v and v[k].get("status") == "ok" and "median_ms" in v[k]]
        best = min(seg, key=lambda r: r["median_ms"]) if seg else None
        ratio = ""
        if best and pt and pt.get("status") == "ok" and pt.get("median_ms"):
            ratio = f"{best['median_ms'] / pt['median_ms']:.2f}×"
        lines.append(f"| {model} | {batch} | {prec} | {ms(pt)} | " + " | ".join(ms(v.get(k)) for k in variants) +
                     f" | {ratio} | {mib(best, 'gpu_peak_mib_smi')} / {mib(pt, 'gpu_peak_mib_smi')} | {mib(pt, 'peak_gpu_mib')} |")
        table.append({"model": model, "batch": int(batch[1:]), "precision": prec,
                      "pytorch_ms": pt.get("median_ms") if pt else None,
                      **{f"{k}_ms": v[k].get("median_ms") for k in variants if k in v},
                      "best": best["label"].split()[-1] if best else None,
                      "ratio": round(best["median_ms"] / pt["median_ms"], 3) if ratio else None})
    lines.append("")
    # The levers: every segtune variant beside the baseline resident step
    # (im2col weight gradients, no CUDA graphs) and PyTorch.
    levers = []
    for (model, batch, prec), v in steps.items():
        base, pt = v.get("resident"), v.get("pytorch")
        for k in variants:
            r = v.get(k)
            if r is None:
                continue
            row = {"model": model, "batch": int(batch[1:]), "precision": prec, "variant": k,
                   "convgrad": r.get("convgrad"), "cuda_graph": r.get("cuda_graph"),
                   "cuda_graph_optimizer": r.get("cuda_graph_optimizer"), "status": r.get("status"),
                   "ms": r.get("median_ms"), "gpu_peak_mib_smi": r.get("gpu_peak_mib_smi")}
            for key, ref in (("vs_resident", base), ("vs_pytorch", pt)):
                if row["ms"] and ref and ref.get("status") == "ok" and ref.get("median_ms"):
                    row[key] = round(row["ms"] / ref["median_ms"], 3)
            levers.append(row)
    if levers:
        lines += ["Levers: segtune's step per variant (cg-CLASSES: ConvGrad for those classes, nodw: all but depthwise; "
                  "+graph: CUDA graphs asked for, 'captured' says whether the step and optimiser sessions took them):", "",
                  "| model | batch | precision | variant | convgrad | captured (step / optimiser) | ms | × resident | × PyTorch | GPU MiB (smi) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        yn = {True: "yes", False: "no", None: "–"}
        for row in levers:
            r = steps[(row["model"], f"b{row['batch']}", row["precision"])][row["variant"]]
            lines.append(f"| {row['model']} | {row['batch']} | {row['precision']} | {row['variant']} | {row['convgrad'] or '–'} | "
                         f"{yn[row['cuda_graph']]} / {yn[row['cuda_graph_optimizer']]} | {ms(r)} | "
                         f"{row.get('vs_resident', '–')} | {row.get('vs_pytorch', '–')} | {mib(r, 'gpu_peak_mib_smi')} |")
        lines.append("")
    ft = {r["label"].split()[-1]: r for r in runs if r.get("kind") == "finetune"}
    if ft:
        def best(r):
            if r.get("status") != "ok":
                return None
            if "BestMIoU" in r:
                return r["BestMIoU"]
            seen = [v for v in r.get("val_miou_epochs") or [] if v is not None]
            return max(seen) if seen else r.get("val_miou")
        seg, pt = ft.get("segtune") or ft.get("segtune-graph"), ft.get("pytorch")
        lines += ["Two-epoch fine-tune (MobileNetV2, CamVid person), process wall time and best val mIoU:", "",
                  "| side | status | wall s | best val mIoU |", "| --- | --- | --- | --- |"]
        for side in ("segtune", "segtune-graph", "pytorch"):
            r = ft.get(side)
            if r:
                m = best(r)
                lines.append(f"| {side} | {r.get('status')} | {r.get('wall_s')} | {'–' if m is None else f'{m:.4f}'} |")
        if seg and pt and seg.get("status") == "ok" and pt.get("status") == "ok" and pt.get("wall_s"):
            lines.append(f"\nsegtune / PyTorch wall time: {seg['wall_s'] / pt['wall_s']:.2f}×")
        lines.append("")
    # Gradient error against float64 per precision, the tolerance being
    # segtune <= 2x PyTorch's own (max and median over the parameters).
    gerr, pterr = {}, {}
    for r in runs:
        if r.get("status") != "ok" or not r.get("precision"):
            continue
        if r.get("kind") == "torchgrad":
            pterr[r["precision"]] = r
        elif r.get("kind") == "graderr":
            gerr[(r["precision"], r.get("convgrad") or "none")] = r
    grads = []
    if gerr or pterr:
        lines += ["Gradient error against float64 (MobileNetV2, batch 2, 128², same inputs), ‖g − g64‖/‖g64‖ per parameter:", "",
                  "| precision | convgrad | PyTorch max / median | segtune max / median | ratio max / median | within 2× |",
                  "| --- | --- | --- | --- | --- | --- |"]
        keys = list(gerr) + [(p, None) for p in pterr if not any(k[0] == p for k in gerr)]
        for prec, cg in keys:
            pt, sg = pterr.get(prec), gerr.get((prec, cg))
            row = {"precision": prec, "convgrad": cg}
            cells = []
            for side, r in (("pytorch", pt), ("segtune", sg)):
                if r:
                    row[f"{side}_max"], row[f"{side}_median"] = r.get("rel_error_max"), r.get("rel_error_median")
                    cells.append(f"{r['rel_error_max']:.3g} / {r['rel_error_median']:.3g}")
                else:
                    cells.append("–")
            verdict, ratio = "–", "–"
            if pt and sg and pt.get("rel_error_max") and pt.get("rel_error_median"):
                rmax, rmed = sg["rel_error_max"] / pt["rel_error_max"], sg["rel_error_median"] / pt["rel_error_median"]
                row["ratio_max"], row["ratio_median"] = round(rmax, 3), round(rmed, 3)
                row["within_2x"] = rmax <= 2 and rmed <= 2
                ratio, verdict = f"{rmax:.2f} / {rmed:.2f}", "yes" if row["within_2x"] else "no"
            lines.append(f"| {prec} | {cg or '–'} | {cells[0]} | {cells[1]} | {ratio} | {verdict} |")
            grads.append(row)
        lines.append("")
    for r in runs:
        if r.get("kind") in ("pytorch", "segtune", "finetune", "device"):
            continue
        lines.append(f"* {r['label']}: {r.get('status')} ({r.get('wall_s', '?')} s)")
        if r.get("kind") == "segment" and r.get("status") == "ok":
            lines.append(f"  {r.get('images')} images, batch {r.get('batch')} on {r.get('device')}: segtune "
                         f"{r.get('segtune_images_per_s', 0):.1f} images/s, bare ONNX Runtime {r.get('bare_images_per_s', 0):.1f} "
                         f"({r.get('ratio', 0):.2f}× of bare)")
            if r.get("segtune_infer_s") is not None:
                lines.append(f"  per run: bare {r['bare_s']:.3f} s, segtune {r['segtune_s']:.3f} s of which "
                             f"{r['segtune_infer_s']:.3f} s in inference")
        if r.get("kind") == "profile" and r.get("profile"):
            lines.append(f"  ONNX Runtime kernel time per op type, {r.get('profile_kernel_ms', 0):.1f} ms a step in all "
                         f"(step {r.get('median_ms', 0):.1f} ms under CUDA_LAUNCH_BLOCKING):")
            for o in r["profile"][:15]:
                lines.append(f"  * {o['op']}: {o['ms']:.1f} ms ({100 * o['share']:.0f} %, {o['nodes']} nodes)")
        if r.get("kind") == "profile" and r.get("profile_roles"):
            lines.append("  The same kernel time per role (onnx/grad/roleprofile; conv roles by class):")
            for o in r["profile_roles"]["rows"]:
                role = o["role"] + (f" ({o['class']})" if o.get("class") else "")
                lines.append(f"  * {role}: {o['ms']:.1f} ms ({100 * o['share']:.0f} %, {o['nodes']} nodes)")
        if r.get("kind") == "torchgrad" and r.get("status") == "ok":
            lines.append(f"  PyTorch {r.get('precision')} on {r.get('device_name') or r.get('device')} vs float64: "
                         f"max relative gradient error {r.get('rel_error_max'):.3g} ({r.get('rel_error_max_param')}), "
                         f"median {r.get('rel_error_median'):.3g}")
    lines.append("")
    with open(args.md, "w") as f:
        f.write("\n".join(lines))
    with open(args.json, "w") as f:
        json.dump({"device": device, "steps": table, "levers": levers, "gradients": grads, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
