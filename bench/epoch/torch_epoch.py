#!/usr/bin/python3
"""PyTorch side of the fine-tuning-epoch benchmark (CPU, or CUDA with --device cuda).

    /usr/bin/python3 bench/epoch/torch_epoch.py --data /work/shared/assets/data/camvid --out /tmp/run \\
        [--model mobilenetv2] [--threads 2] [--workers 1] [--json]
    python3 bench/epoch/torch_epoch.py --data DATA --out /tmp/run --device cuda \\
        [--precision fp32|tf32|fp16|bf16] [--workers N] [--json]

The loop `segtune finetune --epochs 1` runs, written the usual PyTorch way:

* model: DeepLabV3+ as scripts/gen_torch_models.py exports it (build_folded_model:
  same code, seed and BatchNorm folding, so the weights of
  testdata/generated/deeplabv3plus_<model>.onnx), every parameter trained;
* data: a Dataset reading each PNG image and mask (PIL) in __getitem__,
  masks remapped by --label-map, torch DataLoader with --workers worker
  processes, shuffled, batch --batch, partial last batch dropped;
* augmentation: segtune's (finetune/data/augment.go), re-implemented in numpy:
  a random scale in [--scale-min, --scale-max] of the native size, a random
  --crop window of the rescaled image (padded with the colour the
  normalisation maps to ~0, mask ignored there), a random horizontal flip;
  half-pixel bilinear sampling in the same 11-bit fixed point for the image,
  nearest for the mask; then x/127.5 - 1 (segtune's --value-scale/--value-offset);
* loss: cross entropy, ignore_index --ignore, mean over the kept pixels;
* optimiser: AdamW (betas 0.9/0.999, eps 1e-8), --lr, --weight-decay on the
  weights only (tensors of rank >= 2; biases not decayed, as segtune's
  NoDecayVectors), segtune's default schedule poly 0.9 after a linear
  warm-up over 10% of the steps (finetune/schedule), stepped per batch;
* validation: model.eval(), torch.no_grad(), every val image at its native
  size (CamVid: 360x480, as segtune validates a model with dynamic input),
  batch 1, argmax, one confusion matrix, IoU per class, mean over the classes
  that appear (internal/metrics);
* checkpoint: torch.save of the model's and the optimiser's state into --out.

Random draws come from numpy generators seeded per (seed, epoch, example),
not segtune's PCG streams: the same distribution of crops, not the same crops.

--device cuda runs the same recipe on the GPU: model, optimiser state, loss
and validation on the device; the DataLoader (same workers, same CPU
augmentation) pins its batches (pin_memory) and they are copied with
non_blocking=True; cudnn.benchmark on (as ONNX Runtime's default exhaustive
cuDNN search). --precision as bench/trainstep/torch_step.py
(bench/gpu/torch_precision.py): fp32 (default; TF32 off on CUDA), tf32,
fp16 (autocast float16 around forward + loss in training and around the
forward in validation, GradScaler: scaler.step(opt), scaler.update()), bf16
(autocast bfloat16, no scaler); tf32 and fp16 need CUDA, bf16 on the CPU is
CPU autocast. Every step ends in loss.item(), so step times include the GPU's
work; the phase ends are taken after torch.cuda.synchronize().

Prints (with --json, as one object) the phases' wall times (imports, setup,
training with the time spent waiting for batches, validation, checkpoint),
per-step compute times, the mean training loss and the validation mIoU
(val_miou, val_iou per class), the wall time from the script's first line
to the end (wall_s; compare.py times the whole process), and on CUDA the
peak GPU memory since setup: peak_gpu_mib (max_memory_allocated, training +
validation), peak_gpu_reserved_mib (max_memory_reserved), peak_gpu_train_mib
(training only), and of the training, peak_gpu_first_step_mib (the first
step, with cuDNN's benchmark search and its trial workspaces: GBs in fp32)
and peak_gpu_steady_mib (the other steps).
"""
import time

T_START = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import gen_torch_models as gen  # noqa: E402  (also silences torchvision's image warning)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
import torch_precision as tprec  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from PIL import Image  # noqa: E402

T_IMPORTED = time.time()

FIX_BITS = 11  # finetune/data/augment.go: fixBits
FIX_ONE = 1 << FIX_BITS
IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


def go_round(x):
    """Go's math.Round for x >= 0 (half away from zero), not Python's half-to-even."""
    return math.floor(x + 0.5)


def parse_label_map(spec):
    """segtune's --label-map syntax ("9,10:1;11:255;*:0") as a 256-entry lookup table."""
    lut = np.arange(256, dtype=np.uint8)
    if not spec:
        return lut
    rest = None
    explicit = {}
    for item in spec.split(";"):
        src, _, dst = item.partition(":")
        for s in src.split(","):
            if s.strip() == "*":
                rest = int(dst)
            else:
                explicit[int(s)] = int(dst)
    if rest is not None:
        lut[:] = rest
    for s, d in explicit.items():
        lut[s] = d
    return lut


def pairs(images_dir, masks_dir, limit=0):
    """Image/mask paths paired by base name, sorted by image name (segtune's example order)."""
    masks = {os.path.splitext(f)[0]: os.path.join(masks_dir, f) for f in os.listdir(masks_dir)}
    out = []
    for f in sorted(os.listdir(images_dir)):
        stem, ext = os.path.splitext(f)
        if ext.lower() in IMAGE_EXTS and stem in masks:
            out.append((os.path.join(images_dir, f), masks[stem]))
    return out[:limit] if limit else out


def axis_taps(src, scaled, n, off, flip):
    """finetune/data/augment.go axisTaps, vectorised: crop samples -> source samples on one axis."""
    c = np.arange(n)
    if flip:
        c = n - 1 - c
    x = c + off
    valid = (x >= 0) & (x < scaled)
    ratio = src / scaled
    s = np.maximum((x + 0.5) * ratio - 0.5, 0)
    k = s.astype(np.int64)
    f = s - k
    edge = k >= src - 1
    k = np.where(edge, src - 1, k)
    f = np.where(edge, 0.0, f)
    i0 = np.clip(k, 0, src - 1)
    i1 = np.minimum(i0 + 1, src - 1)
    w = np.floor(f * FIX_ONE + 0.5).astype(np.uint32)
    nearest = np.clip(np.floor((x + 0.5) * ratio).astype(np.int64), 0, src - 1)
    return valid, i0, i1, w, nearest


def offset(rng, size, n):
    lo, hi = min(0, size - n), max(0, size - n)
    return lo + int(rng.integers(hi - lo + 1))


class CamVid(torch.utils.data.Dataset):
    """PNG images and masks; training: segtune's random scale, crop and flip."""

    def __init__(self, items, lut, crop=None, scale=(0.5, 2.0), flip=True, seed=1, ignore=255,
                 value_scale=1 / 127.5, value_offset=-1.0):
        self.items, self.lut, self.crop, self.scale, self.flip = items, lut, crop, scale, flip
        self.seed, self.ignore, self.epoch = seed, ignore, 0
        self.value_scale, self.value_offset = np.float32(value_scale), np.float32(value_offset)
        # the colour the normalisation maps closest to 0 (finetune/data/transform.go zeroColor)
        self.pad = min(max(go_round(-value_offset / value_scale), 0), 255)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        img_path, mask_path = self.items[i]
        img = np.asarray(Image.open(img_path).convert("RGB"))
        labels = self.lut[np.asarray(Image.open(mask_path))]
        if self.crop is not None:
            img, labels = self.augment(img, labels, np.random.default_rng([self.seed, self.epoch, i]))
        x = img.astype(np.float32) * self.value_scale + self.value_offset
        return torch.from_numpy(x.transpose(2, 0, 1).copy()), torch.from_numpy(labels.astype(np.int64))

    def augment(self, img, labels, rng):
        """finetune/data/augment.go draw + render: rescale, crop (pad), flip in one pass."""
        h, w = labels.shape
        ch, cw = self.crop
        lo, hi = self.scale
        s = lo + (hi - lo) * rng.random()
        sw, sh = max(go_round(w * s), 1), max(go_round(h * s), 1)
        x0, y0 = offset(rng, sw, cw), offset(rng, sh, ch)
        flip = self.flip and bool(rng.integers(2))
        xv, xi0, xi1, xw, xn = axis_taps(w, sw, cw, x0, flip)
        yv, yi0, yi1, yw, yn = axis_taps(h, sh, ch, y0, False)
        im = img.astype(np.uint32)
        r0, r1 = im[yi0], im[yi1]  # [ch, w, 3]
        wx = xw[None, :, None]
        top = r0[:, xi0] * (FIX_ONE - wx) + r0[:, xi1] * wx
        bot = r1[:, xi0] * (FIX_ONE - wx) + r1[:, xi1] * wx
        wy = yw[:, None, None]
        out = ((top * (FIX_ONE - wy) + bot * wy + (1 << (2 * FIX_BITS - 1))) >> (2 * FIX_BITS)).astype(np.uint8)
        mask = labels[yn][:, xn]
        if not (xv.all() and yv.all()):
            keep = yv[:, None] & xv[None, :]
            out[~keep] = self.pad
            mask = np.where(keep, mask, self.ignore).astype(np.uint8)
        return out, mask


def poly_warmup(total, warmup_frac=0.1, power=0.9):
    """finetune/schedule: poly:0.9,warmup=10% as a LambdaLR factor of the base rate."""
    warm = min(max(go_round(warmup_frac * total), 1), total - 1) if total > 1 else 0

    def factor(step):
        if step < warm:
            return (step + 1) / warm
        p = min((step - warm) / (total - warm), 1.0) if total > warm else 1.0
        return (1 - p) ** power
    return factor


def rss_mib_now():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def validate(model, val_loader, dev, amp_dtype, k, ignore):
    """mIoU and per-class IoU over the validation set at native size."""
    model.eval()
    conf = torch.zeros(k * k, dtype=torch.int64, device=dev)
    with torch.no_grad():
        for x, y in val_loader:
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            with tprec.autocast(dev, amp_dtype):
                logits = model(x)
            pred = logits.argmax(1)
            keep = y != ignore
            conf += torch.bincount(y[keep] * k + pred[keep], minlength=k * k)
    conf = conf.cpu().view(k, k).double()  # .cpu() waits for the GPU
    tp = conf.diag()
    union = conf.sum(0) + conf.sum(1) - tp
    ious = [float(tp[c] / union[c]) if union[c] > 0 else None for c in range(k)]
    seen = [v for v in ious if v is not None]
    return (sum(seen) / len(seen) if seen else None), ious


def main():
    ap = argparse.ArgumentParser(description="PyTorch fine-tuning epoch (DeepLabV3+, BN folded)")
    ap.add_argument("--data", required=True, help="root with images/{train,val} and masks/{train,val}")
    ap.add_argument("--out", required=True, help="folder for the checkpoint")
    ap.add_argument("--model", choices=gen.MODELS, default="mobilenetv2")
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--label-map", default="9,10:1;11:255;*:0", help="segtune's syntax; default: person vs rest")
    ap.add_argument("--ignore", type=int, default=255)
    ap.add_argument("--crop", default="240x320", help="HxW")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--scale-min", type=float, default=0.5)
    ap.add_argument("--scale-max", type=float, default=2.0)
    ap.add_argument("--value-scale", type=float, default=1 / 127.5)
    ap.add_argument("--value-offset", type=float, default=-1.0)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--workers", type=int, default=1, help="DataLoader worker processes")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-val", action="store_true", help="skip validation")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--precision", choices=tprec.PRECISIONS, default="fp32",
                    help="fp32 (on CUDA TF32 off), tf32, fp16 (autocast + GradScaler), bf16 (autocast)")
    ap.add_argument("--epochs", type=int, default=1, help="epochs, each followed by validation (the schedule spans them all)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()
    if args.epochs < 1:
        ap.error("--epochs must be at least 1")
    ch, cw = (int(v) for v in args.crop.lower().split("x"))
    dev = args.device
    cuda = dev == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False")
    amp_dtype = tprec.set_precision(args.precision, dev)  # exits on tf32/fp16 with --device cpu

    t0 = time.time()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    lut = parse_label_map(args.label_map)
    train_items = pairs(os.path.join(args.data, "images", "train"), os.path.join(args.data, "masks", "train"))
    val_items = pairs(os.path.join(args.data, "images", "val"), os.path.join(args.data, "masks", "val"))
    norm = dict(value_scale=args.value_scale, value_offset=args.value_offset, ignore=args.ignore)
    train_ds = CamVid(train_items, lut, crop=(ch, cw), scale=(args.scale_min, args.scale_max), seed=args.seed, **norm)
    val_ds = CamVid(val_items, lut, **norm)
    loader_kw = dict(num_workers=args.workers)
    if cuda:
        loader_kw.update(pin_memory=True)  # page-locked batches: the non_blocking copies below are async
    if args.workers > 0:
        loader_kw.update(prefetch_factor=2)
    train_loader = torch.utils.data.DataLoader(train_ds, batch_size=args.batch, shuffle=True, drop_last=True, **loader_kw)
    val_loader = torch.utils.data.DataLoader(val_ds, batch_size=1, shuffle=False, **loader_kw)

    model = gen.build_folded_model(args.model, args.classes)  # the exported ONNX weights
    for p in model.parameters():
        p.requires_grad_(True)  # torch >= 2 leaves the biases that BN folding created frozen
    if cuda:
        torch.backends.cudnn.benchmark = True  # as ORT's default exhaustive cuDNN algorithm search
        model = model.cuda()  # before the optimiser: its state is created on the device
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    total = len(train_loader) * args.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(opt, poly_warmup(total))
    scaler = tprec.grad_scaler(args.precision)
    peak = tprec.PeakGPU() if cuda else None  # peak of training + validation, not of the setup
    peak_first = None
    t1 = time.time()

    # ---- the epochs, each a training pass and a validation at native size
    step_s, losses = [], []
    wait_s = 0.0
    train_s = val_s = 0.0
    miou, ious, miou_epochs = None, [], []
    for _ in range(args.epochs):
        te = time.time()
        model.train()  # no BN or dropout left: same math as eval
        t_wait = time.perf_counter()
        for x, y in train_loader:
            t_step = time.perf_counter()
            wait_s += t_step - t_wait
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            with tprec.autocast(dev, amp_dtype):
                loss = F.cross_entropy(model(x), y, ignore_index=args.ignore)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)  # skips the update when the scaled gradients overflowed
                scaler.update()
            else:
                loss.backward()
                opt.step()
            sched.step()
            losses.append(loss.item())  # waits for the GPU
            t_wait = time.perf_counter()
            step_s.append(t_wait - t_step)
            if cuda and peak_first is None:
                peak_first = peak.window_mib()  # the first step holds cuDNN's benchmark search
                peak.mark()
        tprec.sync(dev)
        tv = time.time()
        train_s += tv - te
        if not args.no_val:
            miou, ious = validate(model, val_loader, dev, amp_dtype, args.classes, args.ignore)
            miou_epochs.append(miou)
        val_s += time.time() - tv
    t2 = t1 + train_s
    t3 = t2 + val_s
    if cuda:
        peak_steady = peak.window_mib()  # steps 2..n and validation
        peak.mark()
        peak_train = peak.overall_mib()[0]

    # ---- checkpoint
    os.makedirs(args.out, exist_ok=True)
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict()},
               os.path.join(args.out, "last.pt"))
    t4 = time.time()

    gpu = {}
    if cuda:
        alloc, reserved = peak.overall_mib()
        gpu = dict(gpu=torch.cuda.get_device_name(), tf32_flags=tprec.tf32_flags(dev),
                   peak_gpu_mib=alloc, peak_gpu_reserved_mib=reserved, peak_gpu_train_mib=peak_train,
                   peak_gpu_first_step_mib=peak_first, peak_gpu_steady_mib=peak_steady)
    result = {
        "side": "pytorch", "model": args.model, "threads": args.threads, "workers": args.workers,
        "batch": args.batch, "crop": [ch, cw], "train_images": len(train_items), "val_images": len(val_items),
        "steps": len(step_s), "torch": torch.__version__,
        "phases_s": {
            "imports": round(T_IMPORTED - T_START, 3),
            "setup": round(t1 - t0, 3),
            "train": round(t2 - t1, 3),
            "validation": round(t3 - t2, 3),
            "checkpoint": round(t4 - t3, 3),
        },
        # absolute times (time.time) ending each phase, for the driver's CPU-per-phase split
        "marks": {"start": T_START, "imports": T_IMPORTED, "setup_start": t0, "setup": t1, "train": t2,
                  "validation": t3, "checkpoint": t4},
        "train_wait_s": round(wait_s, 3),
        "step_median_s": round(statistics.median(step_s), 3) if step_s else None,
        "step_sum_s": round(sum(step_s), 3),
        "train_loss": round(statistics.mean(losses), 6) if losses else None,
        "val_miou": miou, "val_iou": ious, "epochs": args.epochs, "val_miou_epochs": miou_epochs,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_end_mib": round(rss_mib_now(), 1),
        "device": dev, "precision": args.precision, "peak_gpu_mib": None, **gpu,
    }
    if scaler is not None:
        result["grad_scale"] = float(scaler.get_scale())
    result["wall_s"] = round(time.time() - T_START, 3)  # the script's first line to here
    if args.json:
        print(json.dumps(result))
    else:
        p = result["phases_s"]
        print(f"{args.model} {len(step_s)} steps of {args.batch}x{ch}x{cw}, threads {args.threads}, workers {args.workers}: "
              f"imports {p['imports']} s, setup {p['setup']} s, train {p['train']} s "
              f"(waiting for batches {result['train_wait_s']} s, median step {result['step_median_s']} s), "
              f"validation {p['validation']} s, checkpoint {p['checkpoint']} s; "
              f"loss {result['train_loss']}, val mIoU {miou}"
              + (f"; {dev} {args.precision}" if cuda or args.precision != "fp32" else "")
              + (f", peak GPU {result['peak_gpu_mib']} MiB" if cuda else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
