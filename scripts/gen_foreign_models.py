#!/usr/bin/python3
"""Build a corpus of "foreign" segmentation models: ONNX files shaped like what other projects'
exporters emit, so that segtune's tests exercise models nobody on the project made.

    /usr/bin/python3 scripts/gen_foreign_models.py --out testdata/generated/foreign [--force] [--only NAME,...]

Idempotent: a model whose file and manifest entry are present is skipped (--force rebuilds; so
does a change of this script, whose hash the manifest keeps).
Writes NAME.onnx for each model below and manifest.json, which describes each one: its file and
size, exporter style, opset, inputs (name, layout, shape with dynamic dims as null), outputs
(name, layout, kind logits|softmax|sigmoid, channels), the labels it predicts, the preprocessing it
expects (value range, channel order, mean/std, and the segtune flags that say so), and how it was
checked.

PyTorch exports (torchvision, random weights from torch.manual_seed(0), BatchNorm statistics
re-drawn as in gen_torch_models.py, BN folded by the exporter in eval mode):
  tv_deeplabv3_mbv3_op11_dynamic   deeplabv3_mobilenet_v3_large(num_classes=5, aux_loss=True),
                                   outputs "out" and "aux", opset 11, N/H/W dynamic
  tv_deeplabv3_mbv3_op17_static    the same network, opset 17, fixed 1x3x64x64
  tv_lraspp_mbv3_op13_dynamic      lraspp_mobilenet_v3_large(num_classes=4), opset 13, N/H/W dynamic
  tv_fcn_resnet18_op12_dynamic     FCN with a ResNet-18 backbone (torchvision parts; fcn_resnet50 is
                                   ~135 MB, over the 50 MB budget), 3 classes, opset 12, N/H/W dynamic
Rewrites of tv_lraspp_mbv3_op13_dynamic with the onnx package, mimicking other exporters:
  tf2onnx_lraspp_nhwc_op9          NHWC in and out (Transpose at the edges), opset 9, Upsample with
                                   scales from an initializer, TF-style tensor names (ImageTensor:0)
  pinto_lraspp_nhwc_bgr255_softmax 1x64x64x3 BGR 0..255 input (mean/std folded into Sub/Mul, BGR
                                   folded into the first Conv), final Softmax, NHWC output
  smp_lraspp_sigmoid               final Sigmoid, multi-label, no background channel, Resize by
                                   scales from an initializer, NCHW, N/H/W dynamic
  fixed_lraspp_b1_constsizes       fixed 1x3x96x128, every Resize's sizes from a Constant node
Rewrites of segtune's pretrained models/segtune-synth.onnx (for the "fine-tuning a model that
already does well must not make it worse" test; preprocessing x/127.5 - 1 on RGB):
  synth_softmax                    Softmax(axis 1) appended
  synth_sigmoid                    channels 1..K-1 become sigmoid(z_k - z_0): multi-label, no
                                   background channel; "no channel > 0.5" = background
  synth_nhwc_softmax               NHWC input and output, Softmax over the last axis

Every rewrite is checked against its source with a small ONNX evaluator written with torch ops
(ONNX Runtime has no Python package here); the torch exports are checked against PyTorch. Each
model also gets a reference input in its own layout and value range and the graph's outputs for
it (NAME.ref_input.f32, NAME.ref_output<k>.f32, raw little-endian float32; shapes in the
manifest), which TestForeignModels (cmd/segtune/foreign_test.go) compares with ONNX Runtime's outputs.
Needs Debian's python3-torch, python3-torchvision, python3-onnx.
"""
import argparse
import collections
import copy
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
import torchvision  # noqa: E402
from onnx import helper, numpy_helper, TensorProto  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_torch_models as gtm  # noqa: E402

SEED = 0
MAX_BYTES = 50 * 1024 * 1024
TOLERANCE = 1e-4
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYNTH_MODEL = os.path.join(REPO, "models", "segtune-synth.onnx")
# The original segtune-synth on `segtune data synth --seed 1` (default sizes), val split, with
# --value-scale 0.00784313725490196 --value-offset -1, ONNX Runtime 1.30.0 CPU (segtune eval).
SYNTH_VAL_MIOU = 0.6210

IMAGENET_PRE = {
    "channel_order": "RGB", "value_range": "0..1", "mean": IMAGENET_MEAN, "std": IMAGENET_STD,
    "formula": "(x/255 - mean) / std on RGB",
    "segtune_flags": ["--mean", ",".join(map(str, IMAGENET_MEAN)), "--std", ",".join(map(str, IMAGENET_STD))],
}
SYNTH_PRE = {
    "channel_order": "RGB", "value_range": "-1..1", "value_scale": 1 / 127.5, "value_offset": -1.0,
    "formula": "x/127.5 - 1 on RGB 0..255",
    "segtune_flags": ["--value-scale", "0.00784313725490196", "--value-offset", "-1"],
}
RAW_BGR255_PRE = {
    "channel_order": "BGR", "value_range": "0..255", "formula": "raw BGR 0..255 (normalisation is in the graph)",
    "segtune_flags": ["--bgr", "--value-scale", "1", "--value-offset", "0"],
}


def labels_for(kind, channels):
    if kind == "sigmoid":
        return {"label_classes": channels + 1, "background_channel": False,
                "labels": f"0 = background (no channel > 0.5), 1..{channels} = channel 0..{channels - 1}",
                "decode": "label = 0 if max(channel) <= 0.5 else argmax(channel) + 1"}
    return {"label_classes": channels, "background_channel": True,
            "labels": f"0..{channels - 1} (label k = channel k)", "decode": "label = argmax(channel)"}


# ---------------------------------------------------------------- evaluator

def run_graph(proto, inputs, asym_resize=False):
    """Evaluates an ONNX graph with torch ops; returns (outputs, env of every tensor)."""
    g = proto.graph
    env = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in g.initializer}
    env.update(inputs)
    for node in g.node:
        a = {at.name: helper.get_attribute_value(at) for at in node.attribute}
        x = [env[i] if i else None for i in node.input]
        env.update(zip(node.output, eval_node(node.op_type, x, a, asym_resize)))
    return [env[o.name] for o in g.output], env


def interp_asymmetric(x, out_hw, scales):
    """Bilinear resize with ONNX's asymmetric grid (x_in = x_out / scale), as opset-9 Upsample."""
    y = x
    for axis, (n_out, s) in zip((2, 3), zip(out_hw, scales)):
        n_in = y.shape[axis]
        pos = torch.arange(n_out, dtype=torch.float64) / s
        pos = pos.clamp(0, n_in - 1)
        lo = pos.floor().long().clamp(0, n_in - 1)
        hi = (lo + 1).clamp(max=n_in - 1)
        w = (pos - lo.double()).float()
        shape = [1] * y.dim()
        shape[axis] = n_out
        w = w.reshape(shape)
        y = y.index_select(axis, lo) * (1 - w) + y.index_select(axis, hi) * w
    return y


def eval_node(op, x, a, asym_resize):
    if op in ("Resize", "Upsample"):
        mode = a.get("mode", b"nearest")
        assert mode == b"linear", (op, a)
        if op == "Upsample":
            ctm = b"asymmetric"
            sizes, scales = None, x[1]
        else:
            ctm = a.get("coordinate_transformation_mode", b"half_pixel")
            sizes = x[3] if len(x) > 3 and x[3] is not None and x[3].numel() else None
            scales = x[2] if len(x) > 2 and x[2] is not None and x[2].numel() else None
        in_hw = list(x[0].shape[2:])
        if sizes is not None:
            out = [int(v) for v in sizes.tolist()]
            assert out[:2] == list(x[0].shape[:2])
            out_hw = out[2:]
            sc = [o / i for o, i in zip(out_hw, in_hw)]
        else:
            s = [float(v) for v in scales.tolist()]
            assert s[:2] == [1.0, 1.0], s
            sc = s[2:]
            out_hw = [int(np.floor(i * f)) for i, f in zip(in_hw, sc)]
        if ctm == b"asymmetric" or asym_resize:
            return [interp_asymmetric(x[0], out_hw, sc)]
        assert ctm in (b"half_pixel", b"pytorch_half_pixel"), ctm
        if sizes is not None:
            return [F.interpolate(x[0], size=out_hw, mode="bilinear", align_corners=False)]
        return [F.interpolate(x[0], scale_factor=sc, mode="bilinear", align_corners=False,
                              recompute_scale_factor=False)]
    if op == "Unsqueeze" and len(x) == 1:  # opset < 13: axes attribute
        y = x[0]
        for ax in sorted(a["axes"]):
            y = y.unsqueeze(ax)
        return [y]
    if op == "Transpose":
        return [x[0].permute(*a["perm"])]
    if op == "Softmax":
        return [torch.softmax(x[0], a.get("axis", -1))]
    if op == "Sigmoid":
        return [torch.sigmoid(x[0])]
    if op == "Floor":
        return [torch.floor(x[0])]
    if op == "Cast" and a["to"] not in (TensorProto.FLOAT, TensorProto.INT64):
        to = {TensorProto.INT32: torch.int32, TensorProto.DOUBLE: torch.float64}[a["to"]]
        return [x[0].to(to)]
    return gtm._eval_node(op, x, a)


def max_diff(a, b):
    return float((a - b).abs().max())


# ---------------------------------------------------------------- graph surgery

def fresh(proto, base):
    """A tensor/node name not used in the graph."""
    used = {t.name for t in proto.graph.initializer} | {i.name for i in proto.graph.input}
    for n in proto.graph.node:
        used.update(n.input)
        used.update(n.output)
    name, i = base, 0
    while name in used:
        i += 1
        name = f"{base}_{i}"
    return name


def dce(proto):
    """Removes nodes and initializers that no graph output depends on."""
    g = proto.graph
    need = {o.name for o in g.output}
    keep = []
    for n in reversed(g.node):
        if any(o in need for o in n.output):
            keep.append(n)
            need.update(i for i in n.input if i)
    keep.reverse()
    del g.node[:]
    g.node.extend(keep)
    inits = [t for t in g.initializer if t.name in need]
    del g.initializer[:]
    g.initializer.extend(inits)
    del g.value_info[:]


def set_io(proto, inputs, outputs):
    """Replaces the graph's input/output declarations: [(name, shape list with None for dynamic)]."""
    g = proto.graph

    def vi(name, shape, sym):
        dims = [d if d is not None else sym[k] for k, d in enumerate(shape)]
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)

    del g.input[:]
    g.input.extend(vi(n, s, sym) for n, s, sym in inputs)
    del g.output[:]
    g.output.extend(vi(n, s, sym) for n, s, sym in outputs)


def rename_tensor(proto, old, new):
    for n in proto.graph.node:
        for k, v in enumerate(n.input):
            if v == old:
                n.input[k] = new
        for k, v in enumerate(n.output):
            if v == old:
                n.output[k] = new
    for t in proto.graph.initializer:
        if t.name == old:
            t.name = new


def insert_input_transpose(proto, in_name, perm=(0, 3, 1, 2)):
    """The graph reads in_name NCHW; make in_name an NHWC input followed by a Transpose."""
    inner = fresh(proto, in_name + "_nchw")
    rename_tensor(proto, in_name, inner)
    proto.graph.node.insert(0, helper.make_node("Transpose", [in_name], [inner], perm=list(perm),
                                                name=fresh(proto, "transpose_input")))


def append_node(proto, op, out_name, inputs_extra=(), **attrs):
    """Appends op on the graph's first output; its result becomes that output, named out_name."""
    src = proto.graph.output[0].name
    inner = fresh(proto, src + "_pre" + op.lower())
    rename_tensor(proto, src, inner)
    proto.graph.node.append(helper.make_node(op, [inner, *inputs_extra], [out_name],
                                             name=fresh(proto, op.lower()), **attrs))
    proto.graph.output[0].name = out_name


def freeze_resizes(proto, input_name, shape, how):
    """Replaces every Resize's runtime-computed size by a constant for input shape `shape`.

    how: "const_sizes" (sizes from a Constant node), "init_sizes" (sizes from an initializer),
    "init_scales" (scales from an initializer, opset >= 13 Resize), "upsample9" (opset-9 Upsample with scales from an initializer).
    """
    x = torch.zeros(*shape)
    _, env = run_graph(proto, {input_name: x})
    g = proto.graph
    nodes = []
    for k, n in enumerate(g.node):
        if n.op_type != "Resize":
            nodes.append(n)
            continue
        in_shape = list(env[n.input[0]].shape)
        out_shape = list(env[n.output[0]].shape)
        if how == "const_sizes":
            cname = fresh(proto, f"resize{k}_sizes")
            nodes.append(helper.make_node("Constant", [], [cname], name=cname + "_const",
                                          value=numpy_helper.from_array(np.array(out_shape, np.int64), cname)))
            src = n.input[0]
            del n.input[:]
            n.input.extend([src, "", "", cname])
            nodes.append(n)
            continue
        if how == "init_sizes":
            sname = fresh(proto, f"resize{k}_sizes")
            g.initializer.append(numpy_helper.from_array(np.array(out_shape, np.int64), sname))
            src = n.input[0]
            del n.input[:]
            n.input.extend([src, "", "", sname])
            nodes.append(n)
            continue
        scales = np.array([o / i for o, i in zip(out_shape, in_shape)], np.float32)
        assert [int(np.floor(i * float(f))) for i, f in zip(in_shape, scales)] == out_shape, (in_shape, out_shape)
        sname = fresh(proto, f"resize{k}_scales")
        g.initializer.append(numpy_helper.from_array(scales, sname))
        if how == "init_scales":
            src = n.input[0]
            del n.input[:]
            n.input.extend([src, "", sname])
            nodes.append(n)
        else:
            assert how == "upsample9"
            nodes.append(helper.make_node("Upsample", [n.input[0], sname], list(n.output),
                                          name=n.name or fresh(proto, "upsample"), mode="linear"))
    del g.node[:]
    g.node.extend(nodes)
    dce(proto)


def finish(proto, opset=None, producer=None, producer_version=""):
    """Sets the opset and producer, checks the model and clears stale shape annotations."""
    if opset is not None:
        del proto.opset_import[:]
        proto.opset_import.extend([helper.make_opsetid("", opset)])
    if producer is not None:
        proto.producer_name, proto.producer_version = producer, producer_version
    del proto.graph.value_info[:]
    onnx.checker.check_model(proto)
    onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
    return proto


def opset_of(proto):
    return next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))


# ---------------------------------------------------------------- PyTorch exports

class DictToTuple(nn.Module):
    """torchvision's segmentation models return {"out", "aux"}; the exporter wants tensors."""

    def __init__(self, model, keys):
        super().__init__()
        self.model, self.keys = model, keys

    def forward(self, x):
        d = self.model(x)
        return tuple(d[k] for k in self.keys) if len(self.keys) > 1 else d[self.keys[0]]


def seeded(builder):
    torch.manual_seed(SEED)
    model = builder()
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        gtm.randomize_bn_(model, gen)  # non-trivial BN statistics (folded by the exporter)
    return model.eval()


def tv_deeplabv3():
    m = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=5, aux_loss=True)
    return DictToTuple(m, ("out", "aux"))


def tv_lraspp():
    m = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=4)
    return DictToTuple(m, ("out",))


def tv_fcn_resnet18():
    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.models.segmentation.fcn import FCN, FCNHead
    backbone = IntermediateLayerGetter(torchvision.models.resnet18(weights=None), {"layer4": "out"})
    return DictToTuple(FCN(backbone, FCNHead(512, 3)), ("out",))


def torch_export(spec, out_dir):
    name = spec["name"]
    model = seeded(spec["builder"])
    outs = spec["outputs"]
    classes = spec["classes"]
    dyn = spec["dynamic"]
    shape = spec["export_shape"]
    path = os.path.join(out_dir, name + ".onnx")
    tmp = path + ".tmp"
    dummy = torch.randn(*shape, generator=torch.Generator().manual_seed(SEED + 2))
    axes = None
    if dyn:
        axes = {"input": {0: "batch", 2: "height", 3: "width"}}
        axes.update({o: {0: "batch", 2: "height", 3: "width"} for o in outs})
    torch.onnx.export(model, dummy, tmp, opset_version=spec["opset"], do_constant_folding=True,
                      input_names=["input"], output_names=list(outs), dynamic_axes=axes)
    proto = onnx.load(tmp)
    for o in proto.graph.output:  # the exporter leaves the class dimension symbolic
        o.type.tensor_type.shape.dim[1].dim_value = classes
    finish(proto)
    diffs = {}
    shapes = [tuple(shape)] + ([(2, 3, 64, 96)] if dyn else [])
    with torch.no_grad():
        for s in shapes:
            x = torch.randn(*s, generator=torch.Generator().manual_seed(SEED + 3))
            want = model(x)
            want = want if isinstance(want, tuple) else (want,)
            got, _ = run_graph(proto, {"input": x})
            for o, g_, w in zip(outs, got, want):
                assert g_.shape == w.shape == (s[0], classes) + s[2:], (g_.shape, w.shape)
                diffs[f"{o} {'x'.join(map(str, s))}"] = max_diff(g_, w)
    worst = max(diffs.values())
    assert worst < TOLERANCE, f"{name}: PyTorch vs ONNX max abs diff {worst:.3g}"
    onnx.save(proto, tmp)
    size = os.path.getsize(tmp)
    if size > MAX_BYTES:
        os.remove(tmp)
        raise RuntimeError(f"{name}: {size / 2**20:.1f} MiB is over the {MAX_BYTES / 2**20:.0f} MiB budget")
    os.replace(tmp, path)
    n = None if dyn else shape[0]
    hw = [None, None] if dyn else list(shape[2:])
    entry = {
        "style": spec["style"], "source": spec["source"],
        "inputs": [{"name": "input", "layout": "NCHW", "shape": [n, 3, *hw], "dtype": "float32"}],
        "outputs": [{"name": o, "layout": "NCHW", "shape": [n, classes, *hw], "kind": "logits",
                     "channels": classes, "role": "main" if k == 0 else "auxiliary head"}
                    for k, o in enumerate(outs)],
        "preprocess": IMAGENET_PRE,
        "params": sum(p.numel() for p in model.parameters()),
        "check": {"method": "ONNX graph (torch-op evaluator) vs the PyTorch module", "max_abs_diff": diffs},
    }
    entry.update(labels_for("logits", classes))
    return proto, entry


TORCH_MODELS = [
    {"name": "tv_deeplabv3_mbv3_op11_dynamic", "builder": tv_deeplabv3, "outputs": ("out", "aux"),
     "classes": 5, "opset": 11, "dynamic": True, "export_shape": (1, 3, 64, 64),
     "style": "torchvision/torch.onnx.export (dict outputs out+aux as two graph outputs)",
     "source": "torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(weights=None, "
               "weights_backbone=None, num_classes=5, aux_loss=True)"},
    {"name": "tv_deeplabv3_mbv3_op17_static", "builder": tv_deeplabv3, "outputs": ("out", "aux"),
     "classes": 5, "opset": 17, "dynamic": False, "export_shape": (1, 3, 64, 64),
     "style": "torchvision/torch.onnx.export, static shapes",
     "source": "torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(weights=None, "
               "weights_backbone=None, num_classes=5, aux_loss=True)"},
    {"name": "tv_lraspp_mbv3_op13_dynamic", "builder": tv_lraspp, "outputs": ("out",),
     "classes": 4, "opset": 13, "dynamic": True, "export_shape": (1, 3, 64, 64),
     "style": "torchvision/torch.onnx.export",
     "source": "torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, "
               "weights_backbone=None, num_classes=4)"},
    {"name": "tv_fcn_resnet18_op12_dynamic", "builder": tv_fcn_resnet18, "outputs": ("out",),
     "classes": 3, "opset": 12, "dynamic": True, "export_shape": (1, 3, 64, 64),
     "style": "torchvision/torch.onnx.export",
     "source": "torchvision FCN(IntermediateLayerGetter(resnet18(weights=None), {'layer4': 'out'}), "
               "FCNHead(512, 3)); fcn_resnet50(num_classes=3) would be ~135 MB (> 50 MB budget)"},
]


# ---------------------------------------------------------------- rewrites

def rand_images(shape, seed):
    """RGB images in 0..1, NCHW."""
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed))


def imagenet_norm(x01):
    m = torch.tensor(IMAGENET_MEAN).reshape(1, 3, 1, 1)
    s = torch.tensor(IMAGENET_STD).reshape(1, 3, 1, 1)
    return (x01 - m) / s


def tf_rename(proto, keep):
    """TF-style names: every internal tensor becomes scope/like/this:0."""
    names = {}
    for t in proto.graph.initializer:
        names[t.name] = None
    for n in proto.graph.node:
        for o in n.output:
            names[o] = None
    used = set(keep)
    for old in names:
        if old in keep:
            continue
        base = "deeplab/" + old.replace("::", "/").replace(".", "/").strip("/")
        new, i = base + ":0", 0
        while new in used:
            i += 1
            new = f"{base}_{i}:0"
        used.add(new)
        names[old] = new
    for n in proto.graph.node:
        for k, v in enumerate(n.input):
            if names.get(v):
                n.input[k] = names[v]
        for k, v in enumerate(n.output):
            if names.get(v):
                n.output[k] = names[v]
        if n.name:
            n.name = "deeplab/" + n.name.replace("::", "/").replace(".", "/").strip("/")
    for t in proto.graph.initializer:
        t.name = names[t.name]


def rw_tf2onnx(src, classes):
    p = copy.deepcopy(src)
    freeze_resizes(p, "input", (1, 3, 64, 64), "upsample9")
    insert_input_transpose(p, "input")
    append_node(p, "Transpose", "SemanticLogits:0", perm=[0, 2, 3, 1])
    rename_tensor(p, "input", "ImageTensor:0")
    tf_rename(p, keep={"ImageTensor:0", "SemanticLogits:0"})
    set_io(p, [("ImageTensor:0", [None, None, None, 3], ["N", "H", "W", None])],
           [("SemanticLogits:0", [None, None, None, classes], ["N", "H", "W", None])])
    p.graph.name = "tf2onnx"
    finish(p, opset=9, producer="tf2onnx", producer_version="1.9.3 1190aa")
    checks = {}
    with torch.no_grad():
        for s in [(1, 3, 64, 64), (2, 3, 64, 96)]:
            x = imagenet_norm(rand_images(s, SEED + 4))
            (got,), _ = run_graph(p, {"ImageTensor:0": x.permute(0, 2, 3, 1)})
            (ref,), _ = run_graph(src, {"input": x}, asym_resize=True)
            (exact,), _ = run_graph(src, {"input": x})
            got = got.permute(0, 3, 1, 2)
            checks["x".join(map(str, s))] = max_diff(got, ref)
            checks["vs source (half_pixel grid) " + "x".join(map(str, s))] = max_diff(got, exact)
    assert max(v for k, v in checks.items() if not k.startswith("vs")) < TOLERANCE, checks
    entry = {
        "style": "tf2onnx (TensorFlow DeepLab-like): NHWC in/out via Transpose at the edges, opset 9, "
                 "Upsample(linear) with scales from an initializer, TF tensor names (scope/name:0)",
        "inputs": [{"name": "ImageTensor:0", "layout": "NHWC", "shape": [None, None, None, 3], "dtype": "float32",
                    "constraint": "H and W multiples of 16 (fixed Upsample scales)"}],
        "outputs": [{"name": "SemanticLogits:0", "layout": "NHWC", "shape": [None, None, None, classes],
                     "kind": "logits", "channels": classes, "role": "main"}],
        "preprocess": IMAGENET_PRE,
        "function": "the source with every bilinear resize on opset-9 Upsample's asymmetric grid "
                    "(x_in = x_out/scale) instead of PyTorch's half-pixel grid; otherwise identical",
        "check": {"method": "evaluator: rewrite(NHWC) vs source(NCHW) with asymmetric resizes; "
                            "'vs source' rows show the grid change against the exact source",
                  "max_abs_diff": checks},
    }
    entry.update(labels_for("logits", classes))
    return p, entry


def rw_pinto(src, classes, h=64, w=64):
    p = copy.deepcopy(src)
    freeze_resizes(p, "input", (1, 3, h, w), "init_sizes")
    # BGR: reverse the first convolution's input channels.
    first = next(n for n in p.graph.node if n.op_type == "Conv" and n.input[0] == "input")
    inits = {t.name: t for t in p.graph.initializer}
    wt = numpy_helper.to_array(inits[first.input[1]])
    inits[first.input[1]].CopyFrom(numpy_helper.from_array(np.ascontiguousarray(wt[:, ::-1]), first.input[1]))
    insert_input_transpose(p, "input")
    # (x/255 - mean)/std = (x - 255 mean) * 1/(255 std), per channel, in BGR order, on NHWC.
    mean = np.array(IMAGENET_MEAN[::-1], np.float32) * 255
    scale = 1 / (np.array(IMAGENET_STD[::-1], np.float32) * 255)
    p.graph.initializer.extend([numpy_helper.from_array(mean, "Const_mean_bgr255"),
                                numpy_helper.from_array(scale.astype(np.float32), "Const_inv_std_bgr255")])
    rename_tensor(p, "input", "normalized_nhwc")
    p.graph.node.insert(0, helper.make_node("Mul", ["centered_nhwc", "Const_inv_std_bgr255"],
                                            ["normalized_nhwc"], name="StatefulPartitionedCall/mul"))
    p.graph.node.insert(0, helper.make_node("Sub", ["input_1", "Const_mean_bgr255"], ["centered_nhwc"],
                                            name="StatefulPartitionedCall/sub"))
    append_node(p, "Transpose", "logits_nhwc", perm=[0, 2, 3, 1])
    append_node(p, "Softmax", "Identity", axis=-1)
    set_io(p, [("input_1", [1, h, w, 3], None)], [("Identity", [1, h, w, classes], None)])
    p.graph.name = "tf2onnx"
    finish(p, opset=opset_of(src), producer="tf2onnx", producer_version="1.16.1 15c810")
    with torch.no_grad():
        x01 = rand_images((1, 3, h, w), SEED + 5)
        bgr255 = (x01 * 255)[:, [2, 1, 0]].permute(0, 2, 3, 1).contiguous()
        (got,), _ = run_graph(p, {"input_1": bgr255})
        (ref,), _ = run_graph(src, {"input": imagenet_norm(x01)})
        d = max_diff(got, torch.softmax(ref, 1).permute(0, 2, 3, 1))
    assert d < TOLERANCE, d
    entry = {
        "style": "OpenVINO/PINTO (openvino2tensorflow -> tf2onnx): NHWC BGR 0..255 input, normalisation "
                 "folded into Sub/Mul, BGR folded into the first Conv, fixed 1xHxWx3, Resize sizes from "
                 "initializers, final Softmax over the last (class) axis, NHWC output",
        "inputs": [{"name": "input_1", "layout": "NHWC", "shape": [1, h, w, 3], "dtype": "float32"}],
        "outputs": [{"name": "Identity", "layout": "NHWC", "shape": [1, h, w, classes], "kind": "softmax",
                     "softmax_axis": -1, "channels": classes, "role": "main"}],
        "preprocess": RAW_BGR255_PRE,
        "function": "softmax(source((rgb/255 - mean)/std)) for raw BGR 0..255 input, NHWC",
        "check": {"method": "evaluator: rewrite(BGR 0..255 NHWC) vs softmax(source(normalised RGB NCHW))",
                  "max_abs_diff": {f"1x{h}x{w}x3": d}},
    }
    entry.update(labels_for("softmax", classes))
    return p, entry


def rw_smp(src, classes):
    p = copy.deepcopy(src)
    freeze_resizes(p, "input", (1, 3, 64, 64), "init_scales")
    append_node(p, "Sigmoid", "output")
    set_io(p, [("input", [None, 3, None, None], ["batch", None, "height", "width"])],
           [("output", [None, classes, None, None], ["batch", None, "height", "width"])])
    finish(p, producer="pytorch", producer_version="1.13.1")
    checks = {}
    with torch.no_grad():
        for s in [(1, 3, 64, 64), (2, 3, 64, 96)]:
            x = imagenet_norm(rand_images(s, SEED + 6))
            (got,), _ = run_graph(p, {"input": x})
            (ref,), _ = run_graph(src, {"input": x})
            checks["x".join(map(str, s))] = max_diff(got, torch.sigmoid(ref))
    assert max(checks.values()) < TOLERANCE, checks
    entry = {
        "style": "segmentation_models_pytorch-like: final Sigmoid, multi-label, no background channel, "
                 "NCHW, Resize with scales from an initializer",
        "inputs": [{"name": "input", "layout": "NCHW", "shape": [None, 3, None, None], "dtype": "float32",
                    "constraint": "H and W multiples of 16 (fixed Resize scales)"}],
        "outputs": [{"name": "output", "layout": "NCHW", "shape": [None, classes, None, None], "kind": "sigmoid",
                     "channels": classes, "role": "main"}],
        "preprocess": IMAGENET_PRE,
        "function": "sigmoid(source(x)); channel k is foreground class k+1",
        "check": {"method": "evaluator: rewrite vs sigmoid(source)", "max_abs_diff": checks},
    }
    entry.update(labels_for("sigmoid", classes))
    return p, entry


def rw_fixed_const(src, classes, h=96, w=128):
    p = copy.deepcopy(src)
    freeze_resizes(p, "input", (1, 3, h, w), "const_sizes")
    set_io(p, [("input", [1, 3, h, w], None)], [("out", [1, classes, h, w], None)])
    finish(p)
    with torch.no_grad():
        x = imagenet_norm(rand_images((1, 3, h, w), SEED + 7))
        (got,), _ = run_graph(p, {"input": x})
        (ref,), _ = run_graph(src, {"input": x})
        d = max_diff(got, ref)
    assert d < TOLERANCE, d
    entry = {
        "style": "fixed batch 1 NCHW export, every Resize's sizes from a Constant node",
        "inputs": [{"name": "input", "layout": "NCHW", "shape": [1, 3, h, w], "dtype": "float32"}],
        "outputs": [{"name": "out", "layout": "NCHW", "shape": [1, classes, h, w], "kind": "logits",
                     "channels": classes, "role": "main"}],
        "preprocess": IMAGENET_PRE,
        "function": "identical to the source at 1x3x%dx%d" % (h, w),
        "check": {"method": "evaluator: rewrite vs source", "max_abs_diff": {f"1x3x{h}x{w}": d}},
    }
    entry.update(labels_for("logits", classes))
    return p, entry


# -------- rewrites of segtune's pretrained model

def synth_check(p, src, fn, nhwc=False):
    checks = {}
    with torch.no_grad():
        for s in [(1, 3, 96, 128), (2, 3, 64, 80)]:
            x = rand_images(s, SEED + 8) * 2 - 1
            (ref,), _ = run_graph(src, {"input": x})
            xin = x.permute(0, 2, 3, 1).contiguous() if nhwc else x
            (got,), _ = run_graph(p, {p.graph.input[0].name: xin})
            checks["x".join(map(str, s))] = max_diff(got, fn(ref))
    assert max(checks.values()) < TOLERANCE, checks
    return checks


SYNTH_IO = {"dyn": ["batch", None, "height", "width"]}


def synth_entry(style, inp, out, kind, channels, function, checks):
    e = {"style": style, "inputs": [inp], "outputs": [out], "preprocess": SYNTH_PRE, "function": function,
         "check": {"method": "evaluator: rewrite vs the function of models/segtune-synth.onnx",
                   "max_abs_diff": checks},
         "pretrained": {"base": "models/segtune-synth.onnx", "classes": ["background", "disc", "square"],
                        "data": "segtune data synth --seed 1 (default 96x128, 300 train / 100 val)",
                        "base_val_miou": SYNTH_VAL_MIOU,
                        "expected_val_miou": SYNTH_VAL_MIOU,
                        "note": "segtune eval of this file, once it reads it right, must give the base's "
                                "mIoU (same argmax); fine-tuning must not lower it"}}
    e["outputs"][0].update({"kind": kind, "channels": channels, "role": "main"})
    e.update(labels_for(kind, channels))
    return e


def rw_synth_softmax(src):
    p = copy.deepcopy(src)
    append_node(p, "Softmax", "probs", axis=1)
    set_io(p, [("input", [None, 3, None, None], SYNTH_IO["dyn"])], [("probs", [None, 3, None, None], SYNTH_IO["dyn"])])
    finish(p, producer="pytorch", producer_version="2.1.0")
    checks = synth_check(p, src, lambda z: torch.softmax(z, 1))
    return p, synth_entry("segtune-synth + Softmax(axis=1)",
                          {"name": "input", "layout": "NCHW", "shape": [None, 3, None, None], "dtype": "float32"},
                          {"name": "probs", "layout": "NCHW", "shape": [None, 3, None, None]},
                          "softmax", 3, "softmax(z, axis=1)", checks)


def rw_synth_sigmoid(src):
    p = copy.deepcopy(src)
    z = p.graph.output[0].name
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    p.graph.initializer.extend([i64("bg_start", [0]), i64("bg_end", [1]), i64("fg_end", [3]), i64("ch_axis", [1])])
    p.graph.node.extend([
        helper.make_node("Slice", [z, "bg_start", "bg_end", "ch_axis"], ["z_background"], name="slice_background"),
        helper.make_node("Slice", [z, "bg_end", "fg_end", "ch_axis"], ["z_foreground"], name="slice_foreground"),
        helper.make_node("Sub", ["z_foreground", "z_background"], ["z_margin"], name="sub_background"),
        helper.make_node("Sigmoid", ["z_margin"], ["masks"], name="sigmoid"),
    ])
    set_io(p, [("input", [None, 3, None, None], SYNTH_IO["dyn"])], [("masks", [None, 2, None, None], SYNTH_IO["dyn"])])
    finish(p, producer="pytorch", producer_version="2.1.0")
    checks = synth_check(p, src, lambda z: torch.sigmoid(z[:, 1:] - z[:, :1]))
    return p, synth_entry("segtune-synth as a multi-label sigmoid model (SMP-like): channel k-1 = "
                          "sigmoid(z_k - z_0), k = 1..2; no background channel",
                          {"name": "input", "layout": "NCHW", "shape": [None, 3, None, None], "dtype": "float32"},
                          {"name": "masks", "layout": "NCHW", "shape": [None, 2, None, None]},
                          "sigmoid", 2, "sigmoid(z[:,1:] - z[:,:1]); no channel > 0.5 <=> argmax z = 0", checks)


def rw_synth_nhwc(src):
    p = copy.deepcopy(src)
    insert_input_transpose(p, "input")
    append_node(p, "Transpose", "logits_nhwc", perm=[0, 2, 3, 1])
    append_node(p, "Softmax", "probs", axis=3)
    nhwc = ["batch", "height", "width", None]
    set_io(p, [("input", [None, None, None, 3], nhwc)], [("probs", [None, None, None, 3], nhwc)])
    finish(p, producer="tf2onnx", producer_version="1.16.1 15c810")
    checks = synth_check(p, src, lambda z: torch.softmax(z, 1).permute(0, 2, 3, 1), nhwc=True)
    return p, synth_entry("segtune-synth with NHWC input and output (Transpose at the edges), Softmax over "
                          "the last axis",
                          {"name": "input", "layout": "NHWC", "shape": [None, None, None, 3], "dtype": "float32"},
                          {"name": "probs", "layout": "NHWC", "shape": [None, None, None, 3]},
                          "softmax", 3, "softmax(z, axis=1) transposed to NHWC", checks)


# ---------------------------------------------------------------- driver

LRASPP = "tv_lraspp_mbv3_op13_dynamic"
REWRITES = [
    ("tf2onnx_lraspp_nhwc_op9", LRASPP, lambda s: rw_tf2onnx(s, 4)),
    ("pinto_lraspp_nhwc_bgr255_softmax", LRASPP, lambda s: rw_pinto(s, 4)),
    ("smp_lraspp_sigmoid", LRASPP, lambda s: rw_smp(s, 4)),
    ("fixed_lraspp_b1_constsizes", LRASPP, lambda s: rw_fixed_const(s, 4)),
    ("synth_softmax", SYNTH_MODEL, rw_synth_softmax),
    ("synth_sigmoid", SYNTH_MODEL, rw_synth_sigmoid),
    ("synth_nhwc_softmax", SYNTH_MODEL, rw_synth_nhwc),
]
ALL = [s["name"] for s in TORCH_MODELS] + [r[0] for r in REWRITES]


def write_reference(proto, entry, out_dir, name):
    """A reference input in the model's own layout and value range, and the graph's outputs for it
    (the torch-op evaluator's; the graph itself was checked against its source), as raw
    little-endian float32 files: NAME.ref_input.f32, NAME.ref_output<k>.f32."""
    inp = entry["inputs"][0]
    nhwc = inp["layout"] == "NHWC"
    shp = list(inp["shape"])
    n = shp[0] if shp[0] else 2
    h, w = (shp[1], shp[2]) if nhwc else (shp[2], shp[3])
    h, w = h or 64, w or 96
    x = rand_images((n, 3, h, w), SEED + 9)
    pre = entry["preprocess"]
    if pre is IMAGENET_PRE:
        x = imagenet_norm(x)
    elif pre is SYNTH_PRE:
        x = x * 2 - 1
    else:
        assert pre is RAW_BGR255_PRE
        x = x * 255
    if nhwc:
        x = x.permute(0, 2, 3, 1).contiguous()
    with torch.no_grad():
        outs, _ = run_graph(proto, {inp["name"]: x})
    ref = {"input": f"{name}.ref_input.f32", "input_shape": list(x.shape), "outputs": [],
           "dtype": "float32 little-endian, row-major",
           "computed_by": "the torch-op evaluator on this graph (see check for the graph against its source)"}
    x.numpy().astype("<f4").tofile(os.path.join(out_dir, ref["input"]))
    for k, (o, t) in enumerate(zip(proto.graph.output, outs)):
        f = f"{name}.ref_output{k}.f32"
        t.numpy().astype("<f4").tofile(os.path.join(out_dir, f))
        ref["outputs"].append({"name": o.name, "file": f, "shape": list(t.shape)})
    return ref


def describe(proto, path):
    ops = collections.Counter(n.op_type for n in proto.graph.node)
    return {"file": os.path.basename(path), "bytes": os.path.getsize(path), "opset": opset_of(proto),
            "ir_version": proto.ir_version, "producer": f"{proto.producer_name} {proto.producer_version}".strip(),
            "op_histogram": dict(sorted(ops.items()))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--force", action="store_true", help="rebuild models already present")
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    args = ap.parse_args()
    only = [n for n in args.only.split(",") if n]
    for n in only:
        if n not in ALL:
            ap.error(f"unknown model {n!r}; known: {', '.join(ALL)}")
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    mpath = os.path.join(args.out, "manifest.json")
    manifest = {}
    if os.path.exists(mpath):
        with open(mpath) as f:
            manifest = json.load(f)
    with open(os.path.abspath(__file__), "rb") as f:
        script_sha = hashlib.sha256(f.read()).hexdigest()[:16]
    models = manifest.get("models", {})
    if manifest.get("generator_sha256") != script_sha and models:
        print("gen_foreign_models: the generator changed since the last run; rebuilding")
        args.force = True
    manifest = {
        "generator": "scripts/gen_foreign_models.py", "generator_sha256": script_sha, "torch": torch.__version__,
        "torchvision": torchvision.__version__, "onnx": onnx.__version__, "seed": SEED,
        "data": {
            "how": "segtune data synth --out DIR --seed 1 [--train N --val N]: 96x128 RGB images, masks with "
                   "labels 0 background, 1 disc, 2 square",
            "fits": "every model here: logits/softmax models have K >= 3 classes (labels 0..K-1), sigmoid "
                    "models C >= 2 foreground channels (labels 0 = background, 1..C). Random-weight models "
                    "score near chance; only the synth_* models are meant to score well.",
        },
        "synth_val_miou_of_base": SYNTH_VAL_MIOU,
        "synth_val_miou_of_base_how": "segtune eval --model models/segtune-synth.onnx on `segtune data synth "
                                      "--seed 1` val (100 images, 96x128) with --value-scale 0.00784313725490196 "
                                      "--value-offset -1, ONNX Runtime 1.30.0 CPU",
        "models": models,
    }

    def save():
        order = {n: i for i, n in enumerate(ALL)}
        manifest["models"] = dict(sorted(models.items(), key=lambda kv: order.get(kv[0], len(order))))
        tmp = mpath + ".tmp"
        with open(tmp, "w") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
        os.replace(tmp, mpath)

    def wanted(name):
        if only and name not in only:
            return False
        path = os.path.join(args.out, name + ".onnx")
        if not args.force and os.path.exists(path) and name in models:
            print(f"gen_foreign_models: {name}: present (use --force to rebuild)")
            return False
        return True

    def write(name, proto, entry, t0):
        path = os.path.join(args.out, name + ".onnx")
        if not os.path.exists(path) or args.force or name not in models:
            onnx.save(proto, path + ".tmp")
            os.replace(path + ".tmp", path)
        size = os.path.getsize(path)
        assert size <= MAX_BYTES, f"{name}: {size} bytes"
        info = describe(proto, path)
        info.update(entry)
        info["reference"] = write_reference(proto, entry, args.out, name)
        info["seconds"] = round(time.time() - t0, 1)
        models[name] = info
        save()
        print(f"{info['file']}: {size / 2**20:.1f} MiB, opset {info['opset']}, {info['seconds']}s, "
              f"check max diff {max(v for k, v in info['check']['max_abs_diff'].items() if not k.startswith('vs')):.2e}")

    sources = {}
    for spec in TORCH_MODELS:
        if wanted(spec["name"]):
            t0 = time.time()
            try:
                proto, entry = torch_export(spec, args.out)
            except RuntimeError as e:  # over the size budget
                print(f"gen_foreign_models: skipped {e}")
                continue
            write(spec["name"], proto, entry, t0)
            sources[spec["name"]] = proto
    for name, src_name, fn in REWRITES:
        if not wanted(name):
            continue
        t0 = time.time()
        if src_name not in sources:
            sp = src_name if os.path.isabs(src_name) else os.path.join(args.out, src_name + ".onnx")
            sources[src_name] = onnx.load(sp)
        proto, entry = fn(sources[src_name])
        entry["source_model"] = os.path.relpath(src_name, REPO) if os.path.isabs(src_name) else src_name + ".onnx"
        write(name, proto, entry, t0)
    save()


if __name__ == "__main__":
    sys.exit(main())
