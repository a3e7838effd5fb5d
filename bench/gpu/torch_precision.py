"""Precision and optimiser helpers shared by the PyTorch sides of the benchmarks.

Imported by bench/trainstep/torch_step.py, bench/epoch/torch_epoch.py and
bench/gpu/torch_grad_error.py, so that "--precision X" means the same thing
in all three:

* fp32: TF32 off for cuBLAS matmuls and cuDNN convolutions (strict fp32);
* tf32: TF32 on for both (CUDA only: the CPU has no TF32);
* fp16: torch.autocast(dtype=float16) around forward + loss, a GradScaler for
  the backward, TF32 off for what autocast leaves in fp32 (CUDA only);
* bf16: torch.autocast(dtype=bfloat16) around forward + loss, no scaler, TF32
  off; on the CPU it is CPU autocast bf16 (a dry run of the same code path,
  not a benchmark setting).

The TF32 switches are the legacy allow_tf32 setters on purpose: from
PyTorch 2.9 they write both the legacy and the new (fp32_precision) state,
so neither accessor can later trip the "mix of the legacy and new APIs"
check; setting only the new API would.
"""
import contextlib

import torch

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
OPTIMS = ("none", "sgd", "adam", "adamw")


def set_precision(precision, device):
    """Applies precision's global flags; returns the autocast dtype (None: no autocast).

    Raises SystemExit for what the CPU cannot do (tf32, fp16)."""
    if precision not in PRECISIONS:
        raise SystemExit(f"unknown precision {precision!r}; want one of {PRECISIONS}")
    if device == "cuda":
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    elif precision == "tf32":
        raise SystemExit("--precision tf32 needs --device cuda (the CPU has no TF32)")
    elif precision == "fp16":
        raise SystemExit("--precision fp16 needs --device cuda (fp16 autocast + GradScaler is the CUDA recipe; "
                         "use --precision bf16 for a CPU autocast dry run)")
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)


def tf32_flags(device):
    """The TF32 switches as torch reports them (None off CUDA)."""
    if device != "cuda":
        return None
    return {"matmul": bool(torch.backends.cuda.matmul.allow_tf32), "cudnn": bool(torch.backends.cudnn.allow_tf32)}


def autocast(device, dtype):
    """torch.autocast for dtype, or a no-op context for fp32/tf32."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device, dtype=dtype)


def grad_scaler(precision):
    """A CUDA GradScaler (default settings) for fp16, None otherwise."""
    if precision != "fp16":
        return None
    if hasattr(torch.amp, "GradScaler"):  # torch >= 2.3; torch.cuda.amp.GradScaler is deprecated there
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()


def make_optimizer(name, params):
    """The benchmark's optimisers, foreach/fused left to PyTorch's defaults (None for "none")."""
    if name == "none":
        return None
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.001, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-4)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
    raise SystemExit(f"unknown optimiser {name!r}; want one of {OPTIMS}")


def optim_impl_of(prof):
    """Which implementation an optimiser step ran, from a torch.profiler trace of it.

    The constructor's foreach/fused stay None (PyTorch decides inside step());
    the ops it then dispatches tell: aten::_fused_* (fused kernels),
    aten::_foreach_* (multi-tensor), or neither (a Python loop over the
    parameters). Returns None when no optimiser step ran (GradScaler skipped it
    after an overflow), so the caller can look again on the next step.
    GradScaler's own _amp_foreach_non_finite_check_and_unscale_ does not match
    "aten::_foreach_", so the scaler cannot pass for a foreach optimiser."""
    names = {e.key for e in prof.key_averages()}
    if any(n.startswith("aten::_fused_") for n in names):
        return "fused"
    if any(n.startswith("aten::_foreach_") for n in names):
        return "foreach"
    if any(n.startswith("Optimizer.step#") for n in names):  # the label torch.optim puts on every step()
        return "for-loop"
    return None


def profile_cpu_ops():
    """A CPU-only torch.profiler context (enough to see which aten ops were dispatched)."""
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])


class PeakGPU:
    """Peak CUDA memory over the whole run and over the current window.

    torch.cuda.reset_peak_memory_stats() forgets the earlier peak; mark() folds
    it into the overall peak first, so a run can report both (e.g. with and
    without cuDNN's benchmark search, whose trial workspaces dominate the
    first steps' peak)."""

    def __init__(self):
        self.alloc = self.reserved = 0
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()

    def mark(self):
        """Ends the current window: its peak joins the overall one, a new window starts."""
        torch.cuda.synchronize()
        self.alloc = max(self.alloc, torch.cuda.max_memory_allocated())
        self.reserved = max(self.reserved, torch.cuda.max_memory_reserved())
        torch.cuda.reset_peak_memory_stats()

    def window_mib(self):
        """max_memory_allocated since the last mark (or the start), MiB."""
        return round(torch.cuda.max_memory_allocated() / 2**20, 1)

    def overall_mib(self):
        """(max_memory_allocated, max_memory_reserved) since the start, MiB."""
        return (round(max(self.alloc, torch.cuda.max_memory_allocated()) / 2**20, 1),
                round(max(self.reserved, torch.cuda.max_memory_reserved()) / 2**20, 1))


def sync(device):
    """Waits for the GPU's queued work (no-op on the CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()
