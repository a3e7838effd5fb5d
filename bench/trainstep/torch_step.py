#!/usr/bin/python3
"""PyTorch CPU side of the train-step benchmark.

    /usr/bin/python3 bench/trainstep/torch_step.py --model mobilenetv2 --batch 8 --size 128 \\
        --threads 2 --steps 10 --warmup 2 [--json] [--onnx testdata/generated/deeplabv3plus_mobilenetv2.onnx]

One step = forward + pixel-wise cross-entropy (ignore_index 255, mean) +
backward through every parameter; gradients are dropped (set to None) between
steps and no optimizer update is applied. The model is the one
scripts/gen_torch_models.py exports: the same code, seed and BatchNorm folding,
so it is the math of the ONNX graph. Inputs are random (normal) and targets
random int64 in [0, classes), from a fixed seed.

Reports the median ms/step over --steps after --warmup steps and the peak RSS
of the process (getrusage ru_maxrss, so it includes the import of torch).
--onnx PATH also checks that the ONNX file holds these weights: max abs diff
of every parameter against its initializer and of the forward output against
the ONNX graph evaluated by the generator's small evaluator; exits 1 when
either is >= 1e-4.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import gen_torch_models as gen  # noqa: E402  (also silences torchvision's image warning)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def check_onnx(model, path, x):
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(path)
    inits = {t.name: t for t in proto.graph.initializer}
    param_diff = 0.0
    for name, p in model.named_parameters():
        if name not in inits:
            raise SystemExit(f"{path}: no initializer for parameter {name}")
        w = torch.from_numpy(numpy_helper.to_array(inits[name]).copy())
        if w.shape != p.shape:
            raise SystemExit(f"{path}: {name} has shape {list(w.shape)}, want {list(p.shape)}")
        param_diff = max(param_diff, float((w - p.detach()).abs().max()))
    with torch.no_grad():
        want = model(x)
        (got,) = gen.run_onnx(proto, {"input": x})
    return param_diff, float((got - want).abs().max())


def rss_mib_now():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main():
    ap = argparse.ArgumentParser(description="PyTorch CPU train step (DeepLabV3+, BN folded)")
    ap.add_argument("--model", choices=gen.MODELS, default="mobilenetv2")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=128, help="H = W, a multiple of 16")
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--seed", type=int, default=1234, help="seed of the input/target batch")
    ap.add_argument("--onnx", help="ONNX file to check the weights against")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--tf32", action="store_true", help="on CUDA: allow TF32 in matmuls and cuDNN convolutions (default: strict fp32)")
    args = ap.parse_args()
    if args.size % 16 or args.steps < 1 or args.warmup < 0:
        ap.error("need --size a multiple of 16, --steps >= 1, --warmup >= 0")

    torch.set_num_threads(args.threads)
    model = gen.build_folded_model(args.model, args.classes)  # the exported weights
    model.train()  # no BN or dropout left: same math as eval
    for p in model.parameters():
        p.requires_grad_(True)

    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.batch, 3, args.size, args.size, generator=g)
    target = torch.randint(0, args.classes, (args.batch, args.size, args.size), generator=g,
                           dtype=torch.int64)
    cuda = args.device == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
        torch.backends.cudnn.benchmark = True  # as ORT's default exhaustive cuDNN algorithm search

    result = {"side": "pytorch", "model": args.model, "batch": args.batch, "size": args.size,
              "classes": args.classes, "threads": args.threads, "steps": args.steps,
              "warmup": args.warmup, "params": sum(p.numel() for p in model.parameters()),
              "torch": torch.__version__}
    if args.onnx:
        param_diff, out_diff = check_onnx(model, args.onnx, x[:1])
        result.update(onnx=args.onnx, onnx_param_max_abs_diff=param_diff,
                      onnx_output_max_abs_diff=out_diff)

    if cuda:
        model = model.cuda()
        x, target = x.cuda(), target.cuda()
        result.update(device="cuda", gpu=torch.cuda.get_device_name(), tf32=args.tf32)

    def step():
        model.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), target, ignore_index=255)
        loss.backward()
        return loss.item()  # waits for the GPU

    result["rss_before_steps_mib"] = round(rss_mib_now(), 1)
    for _ in range(args.warmup):
        step()
    times, losses = [], []
    cpu0 = time.process_time()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        losses.append(step())
        times.append((time.perf_counter() - t0) * 1e3)
    cpu_ms = (time.process_time() - cpu0) * 1e3 / args.steps
    result.update(
        median_ms=round(statistics.median(times), 2),
        cpu_ms_per_step=round(cpu_ms, 2),
        min_ms=round(min(times), 2),
        mean_ms=round(statistics.mean(times), 2),
        loss=round(losses[-1], 6),
        peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        times_ms=[round(t, 2) for t in times],
    )

    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.model} batch {args.batch} {args.size}x{args.size} threads {args.threads}: "
              f"median {result['median_ms']} ms/step (min {result['min_ms']}, mean {result['mean_ms']}) "
              f"over {args.steps} steps after {args.warmup} warm-up; peak RSS {result['peak_rss_mib']} MiB; "
              f"loss {result['loss']}")
        if args.onnx:
            print(f"vs {args.onnx}: max |param - initializer| {result['onnx_param_max_abs_diff']:.3g}, "
                  f"max |torch - onnx| output {result['onnx_output_max_abs_diff']:.3g}")
    if args.onnx and max(result["onnx_param_max_abs_diff"], result["onnx_output_max_abs_diff"]) >= gen.TOLERANCE:
        print(f"torch_step: weights do not match {args.onnx}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
