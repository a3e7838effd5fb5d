#!/usr/bin/python3
"""Export tiny transformer and modern-CNN segmenters to ONNX, with float64 PyTorch gradient references.

    /usr/bin/python3 scripts/gen_transformer_models.py --out testdata/generated/transformers [--force] [--only NAME,...]

Idempotent: skipped when every file is present and the manifest was written by this
version of the script (its hash is kept there); --force rebuilds.

Families (random weights from torch.manual_seed, widths small enough that each file is
well under 2 MB and a training step at 64x64 takes tens of milliseconds on a CPU):
  segformer    MiT-style encoder, 4 stages: overlapping patch-embed conv + LayerNorm,
               efficient self-attention (spatial-reduction conv + LayerNorm on keys and
               values), Mix-FFN (Linear, depthwise 3x3 conv, GELU, Linear); all-MLP decoder
               (per-stage 1x1 projection, bilinear upsample, concat, 1x1 fuse, classifier)
  convnext_upernet  ConvNeXt-style backbone, 4 stages (depthwise 7x7, LayerNorm over
               channels through a permute to NHWC, Linear-GELU-Linear, layer scale,
               residual); UperNet-lite head (pooling-pyramid module with global pooling,
               FPN top-down path, fuse, classifier)
  swin         Swin-style blocks in 2 stages: window partition and reverse with
               Reshape/Transpose, window attention with a relative position bias gathered
               from a learned table (Gather), LayerNorm, GELU MLP; conv downsampling
  swin_shifted swin with a shifted-window block after each window block: torch.roll by
               -ws/2 before the attention and back after, and the attention mask that keeps
               tokens the roll brought together apart (built from the map, so it follows
               a dynamic input's size)
  unet_gn      U-Net, 3 levels, conv 3x3 + GroupNorm + SiLU, bilinear upsampling, skips
Each one at opset 13 (LayerNorm decomposed into ReduceMean/Sub/Pow/Sqrt/Div, GELU as Erf)
and 17 (LayerNormalization), N/H/W dynamic ("_dynamic") and fixed 2x3x64x64 ("_fixed"):
  <family>_op<13|17>_<dynamic|fixed>.onnx   input "input" [N,3,H,W] float32, output
                                            "logits" [N,3,H,W]; H, W multiples of 32
and once more at opset 17, fixed, without constant folding and with the initializers
listed as graph inputs (keep_initializers_as_inputs), as older pipelines write it:
  <family>_op17_fixed_nofold.onnx           each Linear's weight and bias reached through
                                            Reshape and Unsqueeze: MatMul(x, Reshape(W)) +
                                            Unsqueeze(b) (same parameters)
and per family one reference (the same weights in every export):
  <family>.ref_input.f32    input [2,3,64,64], raw little-endian float32
  <family>.ref_target.i64   targets [2,64,64], raw little-endian int64: classes 0..2,
                            about 15% of the pixels 255 (ignored)
  <family>.ref.f64 / .json  scripts/torch_grads.py's format: the logits, then the gradient
                            of every parameter ("grad/<parameter>"), and the loss, computed by PyTorch autograd on the module in float64;
                            the loss is F.cross_entropy(logits, target, ignore_index=255),
                            the mean over the pixels that are not ignored
  manifest.json             the models, their op histograms and parameters, the references,
                            and per dynamic export "finite_differences": for one initializer
                            of each kind that only an affine Add/Mul or a Gather makes a
                            parameter, the float64 central differences of the reference loss
                            on the ONNX graph for three of its elements

Every float32 initializer of an export is one parameter; the manifest maps each export's
initializers to parameter names ("params"): the same name, except where the exporter folded
a parameter into a reshaped copy (GroupNorm's scale and bias become [C,1,1] tensors named
onnx::Mul_N, onnx::Add_N), whose gradient is the parameter's, reshaped.
Each export is checked against the module by the evaluator of scripts/torch_grads.py.
Needs Debian's python3-torch and python3-onnx (scripts/install-python-deps.sh).
"""
import argparse
import collections
import hashlib
import json
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import numpy_helper  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_grads  # noqa: E402

SEED = 0
CLASSES = 3
OPSETS = (13, 17)
REF_SHAPE = (2, 3, 64, 64)
IGNORE_INDEX = 255
TOLERANCE = 1e-4  # |ONNX graph - module| in float32, max abs over the logits
MAX_BYTES = 2 * 1024 * 1024


def upsample(x, size):
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class Linear(nn.Module):
    """x @ weight + bias with weight stored [in, out], so that the export is
    MatMul(x, weight) on the parameter itself (nn.Linear's weight would be
    transposed and folded into a new initializer)."""

    def __init__(self, cin, cout):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cin, cout) / cin ** 0.5)
        self.bias = nn.Parameter(torch.randn(cout) * 0.1)

    # as_torch: for the export without constant folding, reach the weight
    # and bias through the ops exporters leave in front of parameters
    # (MatMul(x, Reshape(W)) + Unsqueeze(b)): the parameters, and so the
    # reference gradients, stay the same. (torch 1.13 cancels or folds a
    # Transpose of a parameter even without constant folding.)
    as_torch = False

    def forward(self, x):
        if Linear.as_torch:
            return torch.matmul(x, self.weight.reshape(self.weight.shape[0], -1)) + self.bias.unsqueeze(0)
        return x @ self.weight + self.bias


def to_tokens(x):
    """[N, C, H, W] -> [N, H*W, C]"""
    return x.flatten(2).transpose(1, 2)


def to_map(x, h, w):
    """[N, H*W, C] -> [N, C, H, W]"""
    return x.transpose(1, 2).reshape(x.shape[0], -1, h, w)


# ---------------------------------------------------------------- SegFormer

class EfficientAttention(nn.Module):
    def __init__(self, dim, heads, sr):
        super().__init__()
        self.heads, self.sr_ratio = heads, sr
        self.q, self.kv, self.proj = Linear(dim, dim), Linear(dim, 2 * dim), Linear(dim, dim)
        if sr > 1:
            self.sr = nn.Conv2d(dim, dim, sr, stride=sr)
            self.norm = nn.LayerNorm(dim)

    def forward(self, x, h, w):
        n, L, c = x.shape
        d = c // self.heads
        q = self.q(x).reshape(n, L, self.heads, d).transpose(1, 2)
        if self.sr_ratio > 1:
            x = self.norm(to_tokens(self.sr(to_map(x, h, w))))
        kv = self.kv(x).reshape(n, -1, 2, self.heads, d).permute(2, 0, 3, 1, 4)
        k, v = kv[0], kv[1]
        attn = (q @ k.transpose(-2, -1)) * d ** -0.5
        y = (attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(n, L, c)
        return self.proj(y)


class MixFFN(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.fc2 = Linear(dim, hidden), Linear(hidden, dim)
        self.dw = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden)

    def forward(self, x, h, w):
        return self.fc2(F.gelu(to_tokens(self.dw(to_map(self.fc1(x), h, w)))))


class MiTStage(nn.Module):
    def __init__(self, cin, dim, patch, stride, heads, sr):
        super().__init__()
        self.embed = nn.Conv2d(cin, dim, patch, stride=stride, padding=patch // 2)
        self.embed_norm = nn.LayerNorm(dim)
        self.norm1, self.attn = nn.LayerNorm(dim), EfficientAttention(dim, heads, sr)
        self.norm2, self.ffn = nn.LayerNorm(dim), MixFFN(dim, 2 * dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        x = self.embed(x)
        h, w = x.shape[2], x.shape[3]
        t = self.embed_norm(to_tokens(x))
        t = t + self.attn(self.norm1(t), h, w)
        t = t + self.ffn(self.norm2(t), h, w)
        return to_map(self.norm(t), h, w)


class SegFormer(nn.Module):
    def __init__(self, classes, dims=(8, 16, 24, 32), heads=(1, 1, 2, 2), srs=(8, 4, 2, 1), dec=16):
        super().__init__()
        cins = (3,) + dims[:-1]
        self.stages = nn.ModuleList(
            MiTStage(cins[i], dims[i], 7 if i == 0 else 3, 4 if i == 0 else 2, heads[i], srs[i])
            for i in range(4))
        self.proj = nn.ModuleList(nn.Conv2d(d, dec, 1) for d in dims)
        self.fuse = nn.Conv2d(4 * dec, dec, 1)
        self.classifier = nn.Conv2d(dec, classes, 1)

    def forward(self, x):
        feats, y = [], x
        for s in self.stages:
            y = s(y)
            feats.append(y)
        size = feats[0].shape[-2:]
        ups = [upsample(p(f), size) for p, f in zip(self.proj, feats)]
        y = F.gelu(self.fuse(torch.cat(ups, 1)))
        return upsample(self.classifier(y), x.shape[-2:])


# ---------------------------------------------------------------- ConvNeXt + UperNet

class ChannelsLN(nn.Module):
    """LayerNorm over the channels of [N, C, H, W], through a permute to NHWC."""

    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=1e-6)

    def forward(self, x):
        return self.ln(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc1, self.fc2 = Linear(dim, 4 * dim), Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.rand(dim) * 0.5 + 0.25)  # layer scale

    def forward(self, x):
        y = self.norm(self.dw(x).permute(0, 2, 3, 1))
        y = self.gamma * self.fc2(F.gelu(self.fc1(y)))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXtUperNet(nn.Module):
    def __init__(self, classes, dims=(8, 16, 24, 32), ch=16):
        super().__init__()
        self.stem = nn.Conv2d(3, dims[0], 4, stride=4)
        self.stem_norm = ChannelsLN(dims[0])
        self.down = nn.ModuleList(
            nn.Sequential(ChannelsLN(dims[i - 1]), nn.Conv2d(dims[i - 1], dims[i], 2, stride=2))
            for i in range(1, 4))
        self.blocks = nn.ModuleList(ConvNeXtBlock(d) for d in dims)
        # Pooling-pyramid module on the last stage: the map itself and its global average.
        self.ppm_pool = nn.Conv2d(dims[3], ch, 1)
        self.ppm_out = nn.Conv2d(dims[3] + ch, ch, 3, padding=1)
        self.lateral = nn.ModuleList(nn.Conv2d(d, ch, 1) for d in dims[:3])
        self.fpn = nn.ModuleList(nn.Conv2d(ch, ch, 3, padding=1) for _ in dims[:3])
        self.fuse = nn.Conv2d(4 * ch, ch, 3, padding=1)
        self.classifier = nn.Conv2d(ch, classes, 1)

    def forward(self, x):
        feats = []
        y = self.stem_norm(self.stem(x))
        for i, blk in enumerate(self.blocks):
            if i:
                y = self.down[i - 1](y)
            y = blk(y)
            feats.append(y)
        top = feats[3]
        pooled = upsample(F.gelu(self.ppm_pool(top.mean(dim=(2, 3), keepdim=True))), top.shape[-2:])
        p = F.gelu(self.ppm_out(torch.cat([top, pooled], 1)))
        outs = [p]
        for i in (2, 1, 0):
            lat = self.lateral[i](feats[i])
            p = lat + upsample(p, lat.shape[-2:])
            outs.insert(0, F.gelu(self.fpn[i](p)))
        size = outs[0].shape[-2:]
        y = F.gelu(self.fuse(torch.cat([outs[0]] + [upsample(o, size) for o in outs[1:]], 1)))
        return upsample(self.classifier(y), x.shape[-2:])


# ---------------------------------------------------------------- Swin

class WindowAttention(nn.Module):
    def __init__(self, dim, heads, ws):
        super().__init__()
        self.heads, self.ws = heads, ws
        self.qkv, self.proj = Linear(dim, 3 * dim), Linear(dim, dim)
        self.bias_table = nn.Parameter(torch.randn((2 * ws - 1) ** 2, heads) * 0.5)
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (ws - 1)
        self.register_buffer("bias_index", rel[..., 0] * (2 * ws - 1) + rel[..., 1], persistent=False)

    def forward(self, x, mask=None):
        b, L, c = x.shape
        d = c // self.heads
        qkv = self.qkv(x).reshape(b, L, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * d ** -0.5) @ k.transpose(-2, -1)
        bias = self.bias_table[self.bias_index.reshape(-1)].reshape(L, L, self.heads).permute(2, 0, 1)
        attn = attn + bias.unsqueeze(0)
        if mask is not None:
            attn = attn + mask.unsqueeze(1)
        attn = attn.softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, L, c))


def window_partition(x, ws):
    """[N, H, W, C] -> [N*H/ws*W/ws, ws*ws, C]"""
    n, h, w, c = x.shape
    return x.reshape(n, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)


def window_reverse(win, n, h, w, ws):
    """window_partition's inverse."""
    c = win.shape[-1]
    return win.reshape(n, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(n, h, w, c)


def shifted_window_mask(x, ws, shift):
    """Swin's attention mask for windows of the map rolled by -shift:
    [N*windows, ws*ws, ws*ws], 0 between tokens of the same region of the
    unrolled map, -100 between tokens that the roll brought together. The
    region ids are sliced from a zero map shaped like x (the last ws and the
    last shift rows and columns are regions of their own), so that the mask
    follows the input's size in a dynamic export."""
    z = x[..., :1].detach() * 0
    row = torch.cat([z[:, :-ws], z[:, -ws:-shift] + 1, z[:, -shift:] + 2], 1)
    col = torch.cat([z[:, :, :-ws], z[:, :, -ws:-shift] + 1, z[:, :, -shift:] + 2], 2)
    ids = window_partition(row * 3 + col, ws)  # [B', L, 1]
    diff = ids - ids.transpose(1, 2)
    return (diff * diff).clamp(max=1) * -100.0


class SwinBlock(nn.Module):
    """Swin block: window attention on the map, or, with shift > 0, on the
    map rolled by -shift (torch.roll) under the shifted-window mask, rolled
    back after."""

    def __init__(self, dim, heads, ws, shift=0):
        super().__init__()
        self.ws, self.shift = ws, shift
        self.norm1, self.attn = nn.LayerNorm(dim), WindowAttention(dim, heads, ws)
        self.norm2, self.fc1, self.fc2 = nn.LayerNorm(dim), Linear(dim, 2 * dim), Linear(2 * dim, dim)

    def forward(self, x):
        """x: [N, H, W, C]"""
        n, h, w, c = x.shape
        ws, s = self.ws, self.shift
        y = self.norm1(x)
        mask = None
        if s:
            y = torch.roll(y, shifts=(-s, -s), dims=(1, 2))
            mask = shifted_window_mask(y, ws, s)
        y = window_reverse(self.attn(window_partition(y, ws), mask), n, h, w, ws)
        if s:
            y = torch.roll(y, shifts=(s, s), dims=(1, 2))
        x = x + y
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class SwinSeg(nn.Module):
    """Two stages of Swin blocks; with shifted, each stage is a window
    block followed by a shifted-window block (shift ws/2), as in Swin."""

    def __init__(self, classes, dims=(16, 32), heads=(1, 2), ws=4, dec=16, shifted=False):
        super().__init__()
        self.embed = nn.Conv2d(3, dims[0], 4, stride=4)
        self.embed_norm = nn.LayerNorm(dims[0])
        self.stage1 = self.stage(dims[0], heads[0], ws, shifted)
        self.down = nn.Conv2d(dims[0], dims[1], 2, stride=2)
        self.stage2 = self.stage(dims[1], heads[1], ws, shifted)
        self.proj1, self.proj2 = nn.Conv2d(dims[0], dec, 1), nn.Conv2d(dims[1], dec, 1)
        self.classifier = nn.Conv2d(dec, classes, 1)

    @staticmethod
    def stage(dim, heads, ws, shifted):
        if not shifted:
            return SwinBlock(dim, heads, ws)
        return nn.Sequential(SwinBlock(dim, heads, ws), SwinBlock(dim, heads, ws, shift=ws // 2))

    def forward(self, x):
        f1 = self.stage1(self.embed_norm(self.embed(x).permute(0, 2, 3, 1))).permute(0, 3, 1, 2)
        f2 = self.stage2(self.down(f1).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        p1 = self.proj1(f1)
        y = F.gelu(p1 + upsample(self.proj2(f2), p1.shape[-2:]))
        return upsample(self.classifier(y), x.shape[-2:])


# ---------------------------------------------------------------- U-Net with GroupNorm

def conv_gn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=stride, padding=1), nn.GroupNorm(4, cout), nn.SiLU())


class UNetGN(nn.Module):
    def __init__(self, classes, dims=(8, 16, 32)):
        super().__init__()
        self.enc0 = conv_gn(3, dims[0])
        self.enc1 = conv_gn(dims[0], dims[1], 2)
        self.enc2 = nn.Sequential(conv_gn(dims[1], dims[2], 2), conv_gn(dims[2], dims[2]))
        self.dec1 = conv_gn(dims[2] + dims[1], dims[1])
        self.dec0 = conv_gn(dims[1] + dims[0], dims[0])
        self.classifier = nn.Conv2d(dims[0], classes, 1)

    def forward(self, x):
        e0 = self.enc0(x)
        e1 = self.enc1(e0)
        e2 = self.enc2(e1)
        d1 = self.dec1(torch.cat([upsample(e2, e1.shape[-2:]), e1], 1))
        d0 = self.dec0(torch.cat([upsample(d1, e0.shape[-2:]), e0], 1))
        return self.classifier(d0)


FAMILIES = {
    "segformer": SegFormer,
    "convnext_upernet": ConvNeXtUperNet,
    "swin": SwinSeg,
    "swin_shifted": lambda classes: SwinSeg(classes, shifted=True),
    "unet_gn": UNetGN,
}


def build(family, seed=SEED):
    """The family's module: seeded random init, then every parameter re-drawn
    so that no two hold the same values (the exporter would merge them) and
    norm affines are non-trivial."""
    torch.manual_seed(seed)
    model = FAMILIES[family](CLASSES)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if isinstance(model.get_submodule(name.rpartition(".")[0]) if "." in name else model,
                          (nn.LayerNorm, nn.GroupNorm)):
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + torch.randn(p.shape, generator=gen) * 0.2)
            elif not p.any() or name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
    return model.eval()


# ---------------------------------------------------------------- export

def file_name(family, opset, dynamic, nofold=False):
    return f"{family}_op{opset}_{'dynamic' if dynamic else 'fixed'}{'_nofold' if nofold else ''}.onnx"


def param_map(proto, model):
    """Maps each float initializer of the export to (parameter name, shape):
    by name, or, for a parameter the exporter folded into a reshaped copy, by
    its values. Fails when an initializer is no parameter or a parameter is
    missing."""
    params = {n: p.detach().reshape(-1).numpy() for n, p in model.named_parameters()}
    out = {}
    for t in proto.graph.initializer:
        if t.data_type != onnx.TensorProto.FLOAT:
            continue
        v = numpy_helper.to_array(t).reshape(-1)
        if t.name in params:
            out[t.name] = (t.name, list(t.dims))
            continue
        same = [n for n, pv in params.items() if pv.shape == v.shape and np.array_equal(pv, v)]
        assert len(same) == 1, f"initializer {t.name} {list(t.dims)} is not one parameter ({same})"
        out[t.name] = (same[0], list(t.dims))
    missing = set(params) - {p for p, _ in out.values()}
    assert not missing, f"parameters without an initializer: {sorted(missing)}"
    return out


def export(model, family, opset, dynamic, out_dir, nofold=False):
    """nofold: the export as older or hand-rolled pipelines write it, without
    constant folding (each Linear's weight behind a Reshape, its bias behind
    an Unsqueeze: Linear.as_torch) and with every initializer also listed as
    a graph input (keep_initializers_as_inputs, the IR < 4 form)."""
    path = os.path.join(out_dir, file_name(family, opset, dynamic, nofold))
    tmp = path + ".tmp"
    dummy = torch.randn(*REF_SHAPE, generator=torch.Generator().manual_seed(SEED + 2))
    dyn = {0: "N", 2: "H", 3: "W"}
    # Constant folding would fold the Gather of Swin's relative position bias
    # table into a constant: the table would no longer be trainable.
    # TrainingMode.PRESERVE (the module is in eval mode) skips the eval
    # peephole pass, which would fold the weights' Transposes too.
    Linear.as_torch = nofold
    try:
        torch.onnx.export(model, dummy, tmp, opset_version=opset, do_constant_folding=not (nofold or family.startswith("swin")),
                          keep_initializers_as_inputs=nofold,
                          training=torch.onnx.TrainingMode.PRESERVE if nofold else torch.onnx.TrainingMode.EVAL,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": dyn, "logits": dyn} if dynamic else None)
    finally:
        Linear.as_torch = False
    proto = onnx.load(tmp)
    out_dims = proto.graph.output[0].type.tensor_type.shape.dim
    out_dims[1].Clear()
    out_dims[1].dim_value = CLASSES  # the exporter may leave it symbolic
    onnx.checker.check_model(proto)
    onnx.save(proto, tmp)
    pmap = param_map(proto, model)

    # The ONNX graph, run by torch_grads.py's evaluator, against the module.
    diffs = {}
    shapes = [REF_SHAPE] + ([(1, 3, 96, 128)] if dynamic else [])
    for shape in shapes:
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(SEED + 3))
        with torch.no_grad():
            want = model(x).double()
            env = {t.name: torch_grads.to_torch(numpy_helper.to_array(t)) for t in proto.graph.initializer}
            env["input"] = x.double()
            got = torch_grads.run_graph(proto.graph, env)[0]
        assert got.shape == want.shape == (shape[0], CLASSES) + shape[2:], (got.shape, want.shape)
        diffs["x".join(map(str, shape))] = float((got - want).abs().max())
    worst = max(diffs.values())
    assert worst < TOLERANCE, f"{path}: ONNX graph vs module max abs diff {worst:.3g} >= {TOLERANCE}"
    size = os.path.getsize(tmp)
    assert size <= MAX_BYTES, f"{path}: {size} bytes > {MAX_BYTES}"
    os.replace(tmp, path)
    ops = collections.Counter(n.op_type for n in proto.graph.node)
    return {
        "file": os.path.basename(path), "family": family, "opset": opset, "dynamic": dynamic, "nofold": nofold,
        "bytes": size, "op_histogram": dict(sorted(ops.items())),
        "max_abs_diff_onnx_vs_module": diffs,
        "params": {init: p for init, (p, _) in sorted(pmap.items())},
    }


FD_STEP = 1e-5  # central differences in float64: truncation and rounding both below 1e-8 relative
FD_ELEMENTS = 3


def affine_kinds(graph):
    """The first float initializer of each kind that only an affine Add/Mul
    or a Gather makes a parameter (a Linear's bias, a decomposed
    normalisation's scale and bias, a layer scale, a Gather table), keyed
    "<Add|Mul> after <operator of the other operand>" or "Gather"."""
    inits = {t.name for t in graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
    producer = {o: n.op_type for n in graph.node for o in n.output}
    kinds = {}
    for n in graph.node:
        if n.op_type == "Gather" and n.input[0] in inits:
            kinds.setdefault("Gather", n.input[0])
        elif n.op_type in ("Add", "Mul") and len(n.input) == 2:
            for i, other in ((0, 1), (1, 0)):
                if n.input[i] in inits and n.input[other] not in inits:
                    kinds.setdefault(f"{n.op_type} after {producer.get(n.input[other], 'input')}", n.input[i])
    return kinds


def finite_differences(proto, x, target):
    """Central differences, in float64 on the ONNX graph itself (the
    evaluator of scripts/torch_grads.py, not the module), of the reference
    loss with respect to FD_ELEMENTS elements (first, middle, last) of one
    initializer of each affine_kinds kind: the figures the compiled gradient
    of each newly trainable kind is checked against, independently of
    PyTorch autograd."""
    base = {t.name: torch_grads.to_torch(numpy_helper.to_array(t)) for t in proto.graph.initializer}

    def loss(name, flat_index, delta):
        env = dict(base)
        p = env[name].clone()
        p.view(-1)[flat_index] += delta
        env[name] = p
        env["input"] = x
        logits = torch_grads.run_graph(proto.graph, env)[0]
        return float(F.cross_entropy(logits, target, ignore_index=IGNORE_INDEX, reduction="mean"))

    out = []
    with torch.no_grad():
        for kind, name in sorted(affine_kinds(proto.graph).items()):
            n = base[name].numel()
            elements = sorted({0, n // 2, n - 1})[:FD_ELEMENTS]
            fd = [(loss(name, i, FD_STEP) - loss(name, i, -FD_STEP)) / (2 * FD_STEP) for i in elements]
            out.append({"kind": kind, "initializer": name, "elements": elements, "gradient": fd})
    return out


def reference(family, out_dir):
    """Input, targets, and the float64 loss, logits and gradient of every
    parameter, under the parameter's name (an export's manifest entry maps
    its initializers to these names)."""
    gen = torch.Generator().manual_seed(SEED + 4)
    x = torch.randn(*REF_SHAPE, generator=gen)
    n, _, h, w = REF_SHAPE
    target = torch.randint(0, CLASSES, (n, h, w), generator=gen)
    target[torch.rand(n, h, w, generator=gen) < 0.15] = IGNORE_INDEX
    base = os.path.join(out_dir, family)
    x.numpy().astype("<f4").tofile(base + ".ref_input.f32")
    target.numpy().astype("<i8").tofile(base + ".ref_target.i64")

    m64 = build(family).double()
    named = dict(m64.named_parameters())
    logits = m64(x.double())
    loss = F.cross_entropy(logits, target, ignore_index=IGNORE_INDEX, reduction="mean")
    grads = dict(zip(named, torch.autograd.grad(loss, list(named.values()))))
    tensors = [("logits", logits.detach())]
    for p, g in grads.items():
        tensors.append(("grad/" + p, g))
    torch_grads.write_result(base + ".ref", loss.detach(), tensors)
    return {"input": family + ".ref_input.f32", "input_shape": list(REF_SHAPE),
            "target": family + ".ref_target.i64", "target_shape": [n, h, w],
            "gradients": family + ".ref.json", "loss": float(loss),
            "ignore_index": IGNORE_INDEX}


def script_hash():
    h = hashlib.sha256()
    for f in (__file__, torch_grads.__file__):
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


def up_to_date(out_dir, families, sha):
    try:
        with open(os.path.join(out_dir, "manifest.json")) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return False
    if m.get("generator_sha256") != sha:
        return False
    for fam in families:
        entry = m.get("models", {}).get(fam)
        if not entry:
            return False
        files = [e["file"] for e in entry["exports"]] + [fam + ".ref.f64", fam + ".ref.json"]
        if not all(os.path.exists(os.path.join(out_dir, f)) for f in files):
            return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    ap.add_argument("--only", help="comma-separated families (default: all)")
    args = ap.parse_args()
    families = args.only.split(",") if args.only else list(FAMILIES)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        ap.error(f"unknown families {unknown}; want some of {list(FAMILIES)}")
    os.makedirs(args.out, exist_ok=True)
    sha = script_hash()
    if not args.force and up_to_date(args.out, families, sha):
        print(f"gen_transformer_models: {args.out} is up to date (use --force to regenerate)")
        return
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    mpath = os.path.join(args.out, "manifest.json")
    models = {}
    if os.path.exists(mpath):
        with open(mpath) as f:
            old = json.load(f)
        if old.get("generator_sha256") == sha:
            models = old.get("models", {})
    for fam in families:
        t0 = time.time()
        model = build(fam)
        exports = [export(model, fam, opset, dynamic, args.out)
                   for opset in OPSETS for dynamic in (True, False)]
        exports.append(export(model, fam, OPSETS[-1], False, args.out, nofold=True))
        ref = reference(fam, args.out)
        x = torch.from_numpy(np.fromfile(os.path.join(args.out, ref["input"]), "<f4").reshape(REF_SHAPE)).double()
        target = torch.from_numpy(np.fromfile(os.path.join(args.out, ref["target"]), "<i8").reshape(ref["target_shape"]))
        for e in exports:
            if e["dynamic"]:
                e["finite_differences"] = finite_differences(onnx.load(os.path.join(args.out, e["file"])), x, target)
        models[fam] = {
            "family": fam,
            "param_count": sum(p.numel() for p in model.parameters()),
            "param_tensors": len(list(model.parameters())),
            "exports": exports,
            "reference": ref,
            "seconds": round(time.time() - t0, 1),
        }
        print(f"{fam}: {models[fam]['param_count']:,} params, {len(exports)} exports, "
              f"loss {ref['loss']:.6g}, {models[fam]['seconds']}s")
        for e in exports:
            print(f"  {e['file']}: {e['bytes']:,} B, |onnx - module| "
                  + ", ".join(f"{k}: {v:.1e}" for k, v in e["max_abs_diff_onnx_vs_module"].items()))
    manifest = {
        "generator": "scripts/gen_transformer_models.py", "generator_sha256": sha,
        "torch": torch.__version__, "onnx": onnx.__version__, "seed": SEED, "classes": CLASSES,
        "input": "input [N,3,H,W] float32, H and W multiples of 32",
        "output": f"logits [N,{CLASSES},H,W] float32",
        "models": {k: models[k] for k in FAMILIES if k in models},
    }
    tmp = mpath + ".tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    os.replace(tmp, mpath)


if __name__ == "__main__":
    sys.exit(main())
