#!/usr/bin/python3
"""PyTorch side of the train-step benchmark (CPU, or CUDA with --device cuda).

    /usr/bin/python3 bench/trainstep/torch_step.py --model mobilenetv2 --batch 8 --size 128 \\
        --threads 2 --steps 10 --warmup 2 [--json] [--onnx testdata/generated/deeplabv3plus_mobilenetv2.onnx]
    python3 bench/trainstep/torch_step.py --device cuda [--precision fp32|tf32|fp16|bf16] \\
        [--optim none|sgd|adam|adamw] [--channels-last] --json ...

One step = forward + pixel-wise cross-entropy (ignore_index 255, mean) +
backward through every parameter; gradients are dropped (set to None) between
steps. By default (--optim none) no optimizer update is applied; --optim adds
one to every step: SGD (lr 0.001, momentum 0.9), Adam (lr 1e-4) or AdamW
(lr 1e-4, weight decay 0.01), foreach/fused left to PyTorch, which reports
as optim_impl the implementation it ran (fused, foreach or for-loop, read
from a profile of a warm-up step; null with --warmup 0). The model is the one
scripts/gen_torch_models.py exports: the same code, seed and BatchNorm folding,
so it is the math of the ONNX graph. Inputs are random (normal) and targets
random int64 in [0, classes), from a fixed seed.

Reports the median ms/step over --steps after --warmup steps and the peak RSS
of the process (getrusage ru_maxrss, so it includes the import of torch).

--precision (bench/gpu/torch_precision.py): fp32 (default; on CUDA TF32 off
for matmuls and cuDNN), tf32 (CUDA; --tf32 is an alias), fp16 (CUDA autocast
float16 around forward + loss, torch.amp.GradScaler: scaled backward, and
scaler.step/update with an optimiser; TF32 off), bf16 (autocast bfloat16, no
scaler, TF32 off; on the CPU it runs CPU autocast bf16, as a dry run).
On CUDA each timed step is bracketed by torch.cuda.synchronize(), and
peak_gpu_mib / peak_gpu_reserved_mib are torch.cuda.max_memory_allocated /
max_memory_reserved since the reset after setup (model, batch and optimiser
on the GPU), so they include the warm-up steps, where cuDNN's benchmark
search allocates trial workspaces (GBs in fp32); peak_gpu_timed_mib is the
allocated peak of the timed steps alone.
--channels-last puts the model and the batch in channels_last.
--onnx PATH also checks that the ONNX file holds these weights: max abs diff
of every parameter against its initializer and of the forward output against
the ONNX graph evaluated by the generator's small evaluator; exits 1 when
either is >= 1e-4.
"""
import argparse
import contextlib
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import gen_torch_models as gen  # noqa: E402  (also silences torchvision's image warning)
import gen_transformer_models as gtm  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
import torch_precision as tprec  # noqa: E402
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
    ap = argparse.ArgumentParser(description="PyTorch train step (DeepLabV3+, BN folded)")
    ap.add_argument("--model", choices=gen.MODELS + tuple(gtm.FAMILIES), default="mobilenetv2",
                    help="a DeepLabV3+ backbone, or a family of scripts/gen_transformer_models.py "
                         "(segformer, ...: its own classes, size a multiple of 32, no --onnx check)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=128, help="H = W, a multiple of 16")
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--seed", type=int, default=1234, help="seed of the input/target batch")
    ap.add_argument("--onnx", help="ONNX file to check the weights against")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--precision", choices=tprec.PRECISIONS,
                    help="fp32 (default: on CUDA TF32 off), tf32, fp16 (autocast + GradScaler), bf16 (autocast)")
    ap.add_argument("--tf32", action="store_true", help="alias for --precision tf32")
    ap.add_argument("--optim", choices=tprec.OPTIMS, default="none",
                    help="optimiser step in every step (default none: forward + backward only)")
    ap.add_argument("--channels-last", action="store_true", help="model and batch in torch.channels_last")
    args = ap.parse_args()
    if args.size % 16 or args.steps < 1 or args.warmup < 0:
        ap.error("need --size a multiple of 16, --steps >= 1, --warmup >= 0")
    if args.tf32 and args.precision not in (None, "tf32"):
        ap.error(f"--tf32 contradicts --precision {args.precision}")
    precision = "tf32" if args.tf32 else (args.precision or "fp32")

    torch.set_num_threads(args.threads)
    if args.model in gtm.FAMILIES:
        if args.size % 32 or args.onnx:
            ap.error(f"--model {args.model}: --size must be a multiple of 32; --onnx checks DeepLabV3+ only")
        args.classes = gtm.CLASSES
        model = gtm.build(args.model)  # the exported weights
    else:
        model = gen.build_folded_model(args.model, args.classes)  # the exported weights
    model.train()  # no BN or dropout left: same math as eval
    for p in model.parameters():
        p.requires_grad_(True)

    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.batch, 3, args.size, args.size, generator=g)
    target = torch.randint(0, args.classes, (args.batch, args.size, args.size), generator=g,
                           dtype=torch.int64)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False")
    amp_dtype = tprec.set_precision(precision, args.device)  # exits on tf32/fp16 with --device cpu
    if cuda:
        torch.backends.cudnn.benchmark = True  # as ORT's default exhaustive cuDNN algorithm search

    result = {"side": "pytorch", "model": args.model, "batch": args.batch, "size": args.size,
              "classes": args.classes, "threads": args.threads, "steps": args.steps,
              "warmup": args.warmup, "params": sum(p.numel() for p in model.parameters()),
              "torch": torch.__version__, "optim": args.optim, "precision": precision,
              "channels_last": args.channels_last}
    if args.onnx:
        param_diff, out_diff = check_onnx(model, args.onnx, x[:1])
        result.update(onnx=args.onnx, onnx_param_max_abs_diff=param_diff,
                      onnx_output_max_abs_diff=out_diff)

    if cuda:
        model = model.cuda()
        x, target = x.cuda(), target.cuda()
        result.update(device="cuda", gpu=torch.cuda.get_device_name(), tf32=precision == "tf32",
                      tf32_flags=tprec.tf32_flags("cuda"), cudnn=torch.backends.cudnn.version())
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = tprec.make_optimizer(args.optim, model.parameters())  # after .cuda(): its state lives on the device
    scaler = tprec.grad_scaler(precision)

    def step(probe=False):
        """One training step; with probe, returns the optimiser implementation it ran as well."""
        model.zero_grad(set_to_none=True)  # == opt.zero_grad(set_to_none=True): same parameters
        with tprec.autocast(args.device, amp_dtype):
            loss = F.cross_entropy(model(x), target, ignore_index=255)
        if scaler is not None:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        impl = None
        if opt is not None:
            with tprec.profile_cpu_ops() if probe else contextlib.nullcontext() as prof:
                if scaler is not None:
                    scaler.step(opt)  # skips opt.step() when the scaled gradients overflowed
                    scaler.update()
                else:
                    opt.step()
            if probe:
                impl = tprec.optim_impl_of(prof)
        return loss.item(), impl  # .item() waits for the GPU

    result["rss_before_steps_mib"] = round(rss_mib_now(), 1)
    peak = tprec.PeakGPU() if cuda else None  # peak of the steps (warm-up included), not of the setup
    optim_impl = None
    for _ in range(args.warmup):
        # profile warm-up steps until one ran the optimiser (fp16 may skip the first ones)
        optim_impl = step(probe=opt is not None and optim_impl is None)[1] or optim_impl
    if cuda:
        peak.mark()  # the timed steps' own peak, without cuDNN's benchmark search in the warm-up
    times, losses = [], []
    cpu0 = time.process_time()
    for _ in range(args.steps):
        tprec.sync(args.device)
        t0 = time.perf_counter()
        losses.append(step()[0])
        tprec.sync(args.device)  # .item() already waited; kept so the timer never reads early
        times.append((time.perf_counter() - t0) * 1e3)
    cpu_ms = (time.process_time() - cpu0) * 1e3 / args.steps
    if opt is not None:
        result.update(optim_impl=optim_impl, optim_fused=None if optim_impl is None else optim_impl == "fused",
                      optim_foreach=None if optim_impl is None else optim_impl == "foreach")
    if scaler is not None:
        result["grad_scale"] = float(scaler.get_scale())
    result["peak_gpu_mib"] = None
    if cuda:
        result["peak_gpu_mib"], result["peak_gpu_reserved_mib"] = peak.overall_mib()
        result["peak_gpu_timed_mib"] = peak.window_mib()
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
        extra = ""
        if args.optim != "none" or precision != "fp32" or cuda or args.channels_last:
            extra = f" [{args.device} {precision} optim {args.optim}"
            extra += f" ({result.get('optim_impl')})" if opt is not None else ""
            extra += " channels_last" if args.channels_last else ""
            extra += f"; peak GPU {result['peak_gpu_mib']} MiB allocated, {result['peak_gpu_reserved_mib']} reserved]" \
                if cuda else "]"
        print(f"{args.model} batch {args.batch} {args.size}x{args.size} threads {args.threads}: "
              f"median {result['median_ms']} ms/step (min {result['min_ms']}, mean {result['mean_ms']}) "
              f"over {args.steps} steps after {args.warmup} warm-up; peak RSS {result['peak_rss_mib']} MiB; "
              f"loss {result['loss']}{extra}")
        if args.onnx:
            print(f"vs {args.onnx}: max |param - initializer| {result['onnx_param_max_abs_diff']:.3g}, "
                  f"max |torch - onnx| output {result['onnx_output_max_abs_diff']:.3g}")
    if args.onnx and max(result["onnx_param_max_abs_diff"], result["onnx_output_max_abs_diff"]) >= gen.TOLERANCE:
        print(f"torch_step: weights do not match {args.onnx}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
