#!/usr/bin/python3
"""Export small DeepLabV3+ models (BatchNorm folded) to ONNX for segtune's tests.

    /usr/bin/python3 scripts/gen_torch_models.py --out testdata/generated [--size 128] [--classes 2] [--force]

Writes, for each backbone in MODELS:
  deeplabv3plus_<name>.onnx          opset 13; input "input" [N,3,H,W] float32,
                                     output "logits" [N,classes,H,W]; N, H, W dynamic
  deeplabv3plus_<name>.ref_input.f32 a reference input  [2,3,64,64], raw little-endian float32
  deeplabv3plus_<name>.ref_logits.f32  PyTorch's logits for it [2,classes,64,64]
and manifest.json (opset, op histograms, reference shapes, PyTorch-vs-ONNX diffs).

The weights come from torch.manual_seed(0) with random init (no pretrained
weights), BatchNorm statistics/affine re-drawn to non-trivial values, and then
folded into the preceding convolutions in PyTorch before export, so the PyTorch
module and the ONNX graph compute the same math. bench/trainstep/torch_step.py
rebuilds exactly this module with build_folded_model().

The export is checked three ways: onnx.checker, "no BatchNormalization node",
and a forward pass of the ONNX graph itself (a small evaluator below, written
with torch ops, since ONNX Runtime has no Python package here) against PyTorch.

Needs Debian's python3-torch, python3-torchvision, python3-onnx
(scripts/install-python-deps.sh). H and W should be multiples of 16.
"""
import argparse
import collections
import json
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore", message="Failed to load image Python extension")
warnings.filterwarnings("ignore", message="The shape inference of prim::Constant")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from torch.nn.utils.fusion import fuse_conv_bn_eval  # noqa: E402

OPSET = 13
SEED = 0
MODELS = ("mobilenetv2", "mobilenetv3", "resnet18")
CALIB_SHAPE = (4, 3, 128, 128)  # random batch that sets the BN running statistics
REF_SHAPE = (2, 3, 64, 64)  # small reference input saved for the Go side
TOLERANCE = 1e-4


def onnx_name(model):
    return f"deeplabv3plus_{model}.onnx"


# ---------------------------------------------------------------- architecture

def conv_bn_relu(cin, cout, k, dilation=1):
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, padding=dilation * (k // 2), dilation=dilation, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(),
    )


def dilate_(stage):
    """Output stride 32 -> 16: stride-2 convs become stride 1, k x k convs get dilation 2."""
    for m in stage.modules():
        if isinstance(m, nn.Conv2d):
            if m.stride == (2, 2):
                m.stride = (1, 1)
            k = m.kernel_size[0]
            if k > 1:
                m.dilation = (2, 2)
                m.padding = (k - 1, k - 1)
    return stage


class Backbone(nn.Module):
    """Returns (low-level features at stride 4, high-level features at stride 16)."""

    def __init__(self, name):
        super().__init__()
        tv = torchvision.models
        if name == "mobilenetv2":
            f = tv.mobilenet_v2(weights=None).features
            self.low, self.high = f[:4], nn.Sequential(*f[4:14], dilate_(f[14:18]))
            self.low_channels, self.high_channels = 24, 320
        elif name == "mobilenetv3":
            f = tv.mobilenet_v3_large(weights=None).features
            self.low, self.high = f[:4], nn.Sequential(*f[4:13], dilate_(f[13:17]))
            self.low_channels, self.high_channels = 24, 960
        elif name == "resnet18":
            r = tv.resnet18(weights=None)
            self.low = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1)
            self.high = nn.Sequential(r.layer2, r.layer3, dilate_(r.layer4))
            self.low_channels, self.high_channels = 64, 512
        else:
            raise ValueError(f"unknown backbone {name!r}; want one of {MODELS}")

    def forward(self, x):
        low = self.low(x)
        return low, self.high(low)


def upsample(x, size):
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    def __init__(self, cin, cout=256, rates=(6, 12, 18)):
        super().__init__()
        self.branches = nn.ModuleList(
            [conv_bn_relu(cin, cout, 1)] + [conv_bn_relu(cin, cout, 3, r) for r in rates])
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), conv_bn_relu(cin, cout, 1))
        self.project = conv_bn_relu(cout * (len(rates) + 2), cout, 1)

    def forward(self, x):
        outs = [b(x) for b in self.branches]
        outs.append(upsample(self.pool(x), x.shape[-2:]))
        return self.project(torch.cat(outs, 1))


class DeepLabV3Plus(nn.Module):
    def __init__(self, backbone, classes):
        super().__init__()
        self.backbone = Backbone(backbone)
        self.aspp = ASPP(self.backbone.high_channels)
        self.low_proj = conv_bn_relu(self.backbone.low_channels, 48, 1)
        self.decoder = nn.Sequential(conv_bn_relu(256 + 48, 256, 3), conv_bn_relu(256, 256, 3))
        self.classifier = nn.Conv2d(256, classes, 1)

    def forward(self, x):
        low, high = self.backbone(x)
        y = upsample(self.aspp(high), low.shape[-2:])  # x4
        y = self.decoder(torch.cat([y, self.low_proj(low)], 1))
        return upsample(self.classifier(y), x.shape[-2:])  # x4, to the input size


# ---------------------------------------------------------------- BN folding

def randomize_bn_(model, gen):
    """Non-trivial BN affine and statistics, so that folding is really exercised.

    The affine scale and shift are random; the running statistics then come
    from one train-mode pass over a random batch, so activations stay O(1)
    through the network, as in a trained model.
    """
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for m in bns:
        m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
        m.bias.data.copy_(torch.randn(m.num_features, generator=gen) * 0.2)
        m.reset_running_stats()
        m.momentum = None  # running stats = the statistics of the calibration batch
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bit-identical statistics whatever the caller's thread count
    model(torch.randn(*CALIB_SHAPE, generator=gen))
    torch.set_num_threads(threads)
    model.eval()
    for m in bns:
        m.momentum = 0.1


def fold_bn_(model):
    """Folds every BatchNorm2d into the Conv2d registered just before it.

    That holds for torchvision's MobileNets (Conv2dNormActivation), ResNet
    (conv1/bn1, conv2/bn2, downsample) and the modules above; asserted below.
    The BN module becomes nn.Identity and the conv gains a bias.
    """
    model.eval()
    named = dict(model.named_modules())
    prev_conv = None
    pairs = []
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d):
            prev_conv = name
        elif isinstance(m, nn.BatchNorm2d):
            assert prev_conv is not None, f"BN {name} has no conv before it"
            assert named[prev_conv].out_channels == m.num_features, (prev_conv, name)
            pairs.append((prev_conv, name))
            prev_conv = None  # one BN per conv
    for conv_name, bn_name in pairs:
        fused = fuse_conv_bn_eval(named[conv_name], named[bn_name])
        set_submodule(model, conv_name, fused)
        set_submodule(model, bn_name, nn.Identity())
    assert not any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    return model


def set_submodule(model, name, new):
    parent, _, attr = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, attr, new)


def build_folded_model(name, classes=2, seed=SEED):
    """The exported model: seeded random init, randomized BN, BN folded, eval mode."""
    torch.manual_seed(seed)
    model = DeepLabV3Plus(name, classes)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        randomize_bn_(model, gen)
        fold_bn_(model)
        # torchvision zero-inits some biases (the SE blocks'); identical tensors
        # would be deduplicated by the exporter into one initializer + Identity
        # nodes, so give every parameter its own values.
        for p in model.parameters():
            if not p.any():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    return model


# ---------------------------------------------------------------- ONNX evaluator

def run_onnx(model_proto, inputs):
    """Evaluates an ONNX graph with torch ops: the op subset these exports use.

    An independent check that the exported graph (its weights and its wiring)
    computes what the PyTorch module does. Unknown ops fail loudly.
    """
    g = model_proto.graph
    env = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in g.initializer}
    env.update(inputs)
    for node in g.node:
        a = {at.name: onnx.helper.get_attribute_value(at) for at in node.attribute}
        x = [env[i] if i else None for i in node.input]
        env.update(zip(node.output, _eval_node(node.op_type, x, a)))
    return [env[o.name] for o in g.output]


def _eval_node(op, x, a):
    if op == "Conv":
        assert a.get("auto_pad", b"NOTSET") == b"NOTSET"
        pads = a.get("pads", [0, 0, 0, 0])
        assert pads[:2] == pads[2:], pads
        return [F.conv2d(x[0], x[1], x[2] if len(x) > 2 else None, a.get("strides", 1),
                         tuple(pads[:2]), a.get("dilations", 1), a.get("group", 1))]
    if op == "Identity":
        return [x[0]]
    if op == "Relu":
        return [F.relu(x[0])]
    if op == "Clip":
        lo = x[1].item() if len(x) > 1 and x[1] is not None else None
        hi = x[2].item() if len(x) > 2 and x[2] is not None else None
        return [torch.clamp(x[0], lo, hi)]
    if op == "HardSigmoid":
        return [torch.clamp(a.get("alpha", 0.2) * x[0] + a.get("beta", 0.5), 0, 1)]
    if op == "HardSwish":
        return [F.hardswish(x[0])]
    if op in ("Add", "Mul", "Sub", "Div"):
        return [{"Add": torch.add, "Mul": torch.mul, "Sub": torch.sub, "Div": torch.div}[op](x[0], x[1])]
    if op == "GlobalAveragePool":
        return [x[0].mean(dim=(2, 3), keepdim=True)]
    if op == "MaxPool":
        pads = a.get("pads", [0, 0, 0, 0])
        assert pads[:2] == pads[2:] and not a.get("ceil_mode", 0)
        return [F.max_pool2d(x[0], a["kernel_shape"], a.get("strides", 1), tuple(pads[:2]),
                             a.get("dilations", 1))]
    if op == "Concat":
        return [torch.cat(x, a["axis"])]
    if op == "Constant":
        return [torch.from_numpy(numpy_helper.to_array(a["value"]).copy())]
    if op == "Shape":
        return [torch.tensor(x[0].shape, dtype=torch.int64)]
    if op == "Gather":
        return [torch.index_select(x[0], a.get("axis", 0), x[1].reshape(-1)).reshape(
            x[0].shape[:a.get("axis", 0)] + x[1].shape + x[0].shape[a.get("axis", 0) + 1:])]
    if op == "Slice":
        starts, ends = x[1].tolist(), x[2].tolist()
        axes = x[3].tolist() if len(x) > 3 and x[3] is not None else list(range(len(starts)))
        steps = x[4].tolist() if len(x) > 4 and x[4] is not None else [1] * len(starts)
        idx = [slice(None)] * x[0].dim()
        for s, e, ax, st in zip(starts, ends, axes, steps):
            assert st == 1
            n = x[0].shape[ax]
            idx[ax] = slice(max(min(s, n), -n), max(min(e, n), -n - 1))
        return [x[0][tuple(idx)]]
    if op == "Unsqueeze":
        y = x[0]
        for ax in sorted(int(v) for v in x[1].tolist()):
            y = y.unsqueeze(ax)
        return [y]
    if op == "Cast":
        to = {onnx.TensorProto.FLOAT: torch.float32, onnx.TensorProto.INT64: torch.int64}[a["to"]]
        return [x[0].to(to)]
    if op == "Resize":
        assert a.get("mode") == b"linear", a
        assert a.get("coordinate_transformation_mode") in (b"half_pixel", b"pytorch_half_pixel"), a
        sizes = x[3] if len(x) > 3 and x[3] is not None and x[3].numel() else None
        assert sizes is not None, "Resize by scales is not used by these exports"
        size = [int(v) for v in sizes.tolist()]
        assert size[:2] == list(x[0].shape[:2])
        return [upsample(x[0], size[2:])]
    raise NotImplementedError(f"ONNX op {op} is not in the test evaluator")


# ---------------------------------------------------------------- export

def export(name, out_dir, size, classes):
    t0 = time.time()
    model = build_folded_model(name, classes)
    path = os.path.join(out_dir, onnx_name(name))
    tmp = path + ".tmp"
    dummy = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(SEED + 2))
    dyn = {0: "N", 2: "H", 3: "W"}
    torch.onnx.export(model, dummy, tmp, opset_version=OPSET, do_constant_folding=True,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": dyn, "logits": dyn})
    proto = onnx.load(tmp)
    # The exporter leaves the class dimension symbolic ("Resizelogits_dim_1").
    proto.graph.output[0].type.tensor_type.shape.dim[1].dim_value = classes
    onnx.save(proto, tmp)
    onnx.checker.check_model(proto)
    ops = collections.Counter(n.op_type for n in proto.graph.node)
    assert "BatchNormalization" not in ops, f"{name}: BatchNormalization left in the graph"
    # Every PyTorch parameter is one initializer of the same name and shape
    # (what the Go side trains, and what torch_step.py --onnx compares).
    inits = {t.name: tuple(t.dims) for t in proto.graph.initializer}
    for pname, p in model.named_parameters():
        assert inits.get(pname) == tuple(p.shape), f"{name}: parameter {pname} is not an initializer"
    float_inits = {t.name for t in proto.graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
    assert float_inits == set(dict(model.named_parameters())), f"{name}: float initializers != parameters"

    # PyTorch vs the ONNX graph, at the export size and at a smaller dynamic size.
    diffs = {}
    with torch.no_grad():
        for shape in [(1, 3, size, size), REF_SHAPE]:
            x = torch.randn(*shape, generator=torch.Generator().manual_seed(SEED + 3))
            want = model(x)
            (got,) = run_onnx(proto, {"input": x})
            assert got.shape == want.shape == (shape[0], classes) + shape[2:], (got.shape, want.shape)
            diffs["x".join(map(str, shape))] = float((got - want).abs().max())
    worst = max(diffs.values())
    assert worst < TOLERANCE, f"{name}: PyTorch vs ONNX max abs diff {worst:.3g} >= {TOLERANCE}"

    base = path[:-len(".onnx")]
    x.numpy().astype("<f4").tofile(base + ".ref_input.f32")  # x is REF_SHAPE, the last loop
    want.numpy().astype("<f4").tofile(base + ".ref_logits.f32")
    os.replace(tmp, path)
    return {
        "file": os.path.basename(path),
        "backbone": name,
        "params": sum(p.numel() for p in model.parameters()),
        "param_tensors": len(list(model.parameters())),  # = the float32 initializers
        "op_histogram": dict(sorted(ops.items())),
        "max_abs_diff_torch_vs_onnx": diffs,
        "logits_abs_max": float(want.abs().max()),
        "reference": {"input": os.path.basename(base) + ".ref_input.f32",
                      "input_shape": list(REF_SHAPE),
                      "logits": os.path.basename(base) + ".ref_logits.f32",
                      "logits_shape": [REF_SHAPE[0], classes, *REF_SHAPE[2:]],
                      "dtype": "float32 little-endian, row-major"},
        "seconds": round(time.time() - t0, 1),
    }


def up_to_date(out_dir, size, classes):
    manifest = os.path.join(out_dir, "manifest.json")
    paths = [manifest] + [os.path.join(out_dir, onnx_name(m)) for m in MODELS]
    if not all(os.path.exists(p) for p in paths):
        return False
    if min(os.path.getmtime(p) for p in paths) < os.path.getmtime(os.path.abspath(__file__)):
        return False
    with open(manifest) as f:
        m = json.load(f)
    return (m.get("size"), m.get("classes"), m.get("opset")) == (size, classes, OPSET)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--size", type=int, default=128, help="H = W of the export/check input")
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    args = ap.parse_args()
    if args.size % 16:
        ap.error("--size must be a multiple of 16")
    os.makedirs(args.out, exist_ok=True)
    if not args.force and up_to_date(args.out, args.size, args.classes):
        print(f"gen_torch_models: {args.out} is up to date (use --force to regenerate)")
        return
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    manifest = {"generator": "scripts/gen_torch_models.py", "torch": torch.__version__,
                "torchvision": torchvision.__version__, "onnx": onnx.__version__,
                "opset": OPSET, "seed": SEED, "size": args.size, "classes": args.classes,
                "input": "input [N,3,H,W] float32", "output": "logits [N,classes,H,W] float32",
                "models": {}}
    for name in MODELS:
        info = export(name, args.out, args.size, args.classes)
        manifest["models"][name] = info
        print(f"{info['file']}: {info['params']:,} params, opset {OPSET}, {info['seconds']}s")
        print("  max |torch - onnx|: " + ", ".join(
            f"{k}: {v:.2e}" for k, v in info["max_abs_diff_torch_vs_onnx"].items())
            + f" (|logits| <= {info['logits_abs_max']:.3g})")
        print("  ops: " + ", ".join(f"{k}={v}" for k, v in info["op_histogram"].items()))
    union = sorted({op for m in manifest["models"].values() for op in m["op_histogram"]})
    manifest["all_ops"] = union
    print("all op types: " + " ".join(union))
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
