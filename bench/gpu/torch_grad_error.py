#!/usr/bin/python3
"""PyTorch's own gradient error against float64, the yardstick for segtune's CUDA gradients.

    python3 bench/gpu/torch_grad_error.py --model mobilenetv2 --batch 2 --size 128 --classes 2 \\
        --seed 1 --device cuda --precision fp32|tf32|fp16|bf16 [--save-inputs PATH.npz] [--load-inputs PATH.npz]
    /usr/bin/python3 bench/gpu/torch_grad_error.py --device cpu --precision fp32   # dry run, no GPU

segtune's tolerance for its CUDA gradients is "at most 2x PyTorch CUDA's own
error against float64 at the same precision, measured in the same run". This
measures the PyTorch half. The model is the one scripts/gen_torch_models.py
exports (build_folded_model: the weights of
testdata/generated/deeplabv3plus_<model>.onnx, parameter names = initializer
names); the batch is seeded: x ~ normal float32 [batch,3,size,size], target
int64 uniform in [0, classes) [batch,size,size] (--load-inputs takes both
from a file instead). The loss is cross entropy, ignore_index 255, mean.

Gradients of every parameter are computed twice:
  (a) reference: float64 on the CPU (a copy of the model, .double(), x.double());
  (b) on --device at --precision, as bench/trainstep/torch_step.py runs a step
      (bench/gpu/torch_precision.py): fp32 = TF32 off, tf32 = TF32 on, bf16 =
      autocast bfloat16 around forward + loss, fp16 = autocast float16 with
      loss scaling as torch.amp.GradScaler settles it: the scale starts at
      GradScaler's 2**16 and halves while any gradient is inf/NaN, then the
      gradients are divided by it (exact: a power of two). cuDNN's benchmark
      (algorithm search) is on, as in torch_step.py (--no-cudnn-benchmark: off).
      On the CPU only fp32 and bf16 (CPU autocast) run.

Prints one JSON object: per parameter the relative error
||g - g64|| / ||g64|| (2-norms over the whole tensor, computed in float64;
null where g64 is exactly 0), its max (and which parameter) and median over
the parameters, the error of all gradients as one vector, the loss both ways,
the device name and the precision.

--save-inputs PATH.npz writes (np.savez, uncompressed) x (float32), target
(int64), loss (float64, 0-d) and the float64 gradient of every parameter under
its parameter name (e.g. "aspp.project.0.weight"), so the Go side can compute
its own gradients on identical inputs. --load-inputs PATH.npz reads x and
target from such a file (batch and size then come from the file), and its
float64 loss and gradients where it has every parameter's.
"""
import argparse
import copy
import json
import os
import platform
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import gen_torch_models as gen  # noqa: E402  (also silences torchvision's image warning)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_precision as tprec  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

RESERVED = ("x", "target", "loss")  # npz keys that are not parameter names
INIT_SCALE = 2.0 ** 16  # torch.amp.GradScaler's default init_scale


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def loss_of(model, x, target):
    return F.cross_entropy(model(x), target, ignore_index=255)


def device_grads(model, x, target, device, precision):
    """Loss and parameter gradients (float32, on the CPU) at precision; and the fp16 loss scale."""
    amp_dtype = tprec.set_precision(precision, device)
    params = list(model.parameters())
    with tprec.autocast(device, amp_dtype):
        loss = loss_of(model, x, target)
    scale = None
    if precision == "fp16":
        # GradScaler's dynamic scaling, settled in one go: the largest power of two
        # <= 2**16 whose scaled backward stays finite (it halves on every overflow).
        scale = INIT_SCALE
        while True:
            grads = torch.autograd.grad(loss * scale, params, retain_graph=True)
            if bool(torch.stack([torch.isfinite(g).all() for g in grads]).all()):
                break
            scale /= 2
            if scale < 1:
                raise SystemExit("fp16: gradients overflow even without loss scaling")
        grads = [g / scale for g in grads]
    else:
        grads = torch.autograd.grad(loss, params)
    tprec.sync(device)
    return float(loss.detach()), [g.detach().float().cpu() for g in grads], scale


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=gen.MODELS, default="mobilenetv2")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--size", type=int, default=128, help="H = W, a multiple of 16")
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1, help="seed of the input/target batch")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--precision", choices=tprec.PRECISIONS, default="fp32")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--no-cudnn-benchmark", action="store_true", help="cuDNN's default algorithms, no search")
    ap.add_argument("--save-inputs", metavar="PATH.npz", help="write x, target, loss and the float64 gradients")
    ap.add_argument("--load-inputs", metavar="PATH.npz", help="use x and target from this file")
    args = ap.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False")
    tprec.set_precision(args.precision, args.device)  # fail early (tf32/fp16 on the CPU), before the float64 pass

    if args.load_inputs:
        with np.load(args.load_inputs) as d:
            x = torch.from_numpy(np.ascontiguousarray(d["x"], dtype=np.float32))
            target = torch.from_numpy(np.ascontiguousarray(d["target"], dtype=np.int64))
        if x.dim() != 4 or x.shape[1] != 3 or target.shape != (x.shape[0], x.shape[2], x.shape[3]):
            raise SystemExit(f"{args.load_inputs}: want x [N,3,H,W] and target [N,H,W], "
                             f"got {list(x.shape)} and {list(target.shape)}")
        args.batch, args.size = x.shape[0], x.shape[2]
        if x.shape[2] != x.shape[3]:
            args.size = [x.shape[2], x.shape[3]]
    else:
        if args.size % 16:
            ap.error("need --size a multiple of 16")
        g = torch.Generator().manual_seed(args.seed)
        x = torch.randn(args.batch, 3, args.size, args.size, generator=g)
        target = torch.randint(0, args.classes, (args.batch, args.size, args.size), generator=g,
                               dtype=torch.int64)

    model = gen.build_folded_model(args.model, args.classes)  # the exported weights, float32
    model.train()  # no BN or dropout left: same math as eval
    for p in model.parameters():
        p.requires_grad_(True)  # torch >= 2 leaves the biases that BN folding created frozen
    names = [n for n, _ in model.named_parameters()]
    clash = set(names) & set(RESERVED)
    if clash:
        raise SystemExit(f"parameter names {sorted(clash)} clash with the npz keys {RESERVED}")

    # (a) float64 on the CPU, or as --load-inputs's file has it (the same
    # computation on the same inputs, which the check's later precisions
    # need not repeat)
    g64 = None
    if args.load_inputs:
        with np.load(args.load_inputs) as d:
            if "loss" in d and all(n in d for n in names):
                g64 = [torch.from_numpy(np.asarray(d[n], dtype=np.float64)) for n in names]
                loss64 = float(d["loss"])
    if g64 is None:
        m64 = copy.deepcopy(model).double()
        loss64 = loss_of(m64, x.double(), target)
        g64 = [g.detach() for g in torch.autograd.grad(loss64, list(m64.parameters()))]
        loss64 = float(loss64.detach())
        del m64

    # (b) the device at the precision
    mdev = copy.deepcopy(model)
    if cuda:
        torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
        mdev = mdev.cuda()
    loss_dev, gdev, scale = device_grads(mdev, x.to(args.device), target.to(args.device), args.device,
                                         args.precision)

    rel = {}
    for name, a, b in zip(names, gdev, g64):
        ref = float(b.norm())
        rel[name] = float((a.double() - b).norm()) / ref if ref > 0 else None
    seen = {n: e for n, e in rel.items() if e is not None}
    worst = max(seen, key=seen.get) if seen else None
    diff_all = sum(float((a.double() - b).pow(2).sum()) for a, b in zip(gdev, g64)) ** 0.5
    ref_all = sum(float(b.pow(2).sum()) for b in g64) ** 0.5

    result = {
        "side": "pytorch", "model": args.model, "batch": args.batch, "size": args.size, "classes": args.classes,
        "seed": None if args.load_inputs else args.seed, "inputs": args.load_inputs or "seeded",
        "device": args.device, "device_name": torch.cuda.get_device_name() if cuda else cpu_name(),
        "precision": args.precision, "tf32_flags": tprec.tf32_flags(args.device),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark) if cuda else None,
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "loss_f64": loss64, "loss": loss_dev, "loss_rel_error": abs(loss_dev - loss64) / abs(loss64),
        "loss_scale": scale,
        "params": len(names), "zero_grad_params": [n for n, e in rel.items() if e is None],
        "rel_error_max": seen[worst] if worst else None, "rel_error_max_param": worst,
        "rel_error_median": statistics.median(seen.values()) if seen else None,
        "rel_error_all": diff_all / ref_all if ref_all > 0 else None,
        "rel_error": rel,
    }
    if args.save_inputs:
        np.savez(args.save_inputs, x=x.numpy(), target=target.numpy(), loss=np.float64(loss64),
                 **{n: b.numpy() for n, b in zip(names, g64)})
        result["saved"] = args.save_inputs
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
