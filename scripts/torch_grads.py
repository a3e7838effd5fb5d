#!/usr/bin/python3
"""Loss and parameter gradients of an ONNX segmentation model by PyTorch autograd, in float64.

    /usr/bin/python3 scripts/torch_grads.py --model M.onnx --input x.f32 --input-shape 2,3,64,64 \
        --target t.i64 --params NAME[,NAME...] --out PREFIX [--ignore-index 255] [--input-name input]

The reference that onnx/grad/torchref_test.go holds segtune's training graphs to.
The ONNX graph is interpreted op by op with torch functions (see OPS below; an
op outside that set fails loudly), every float initializer and the input are
promoted to float64, the initializers named by --params become leaf tensors
with requires_grad, and the loss is the mean pixel-wise cross-entropy of the
first graph output (logits [N, C, H, W]) against the target [N, H, W], pixels
equal to --ignore-index left out: F.cross_entropy(..., ignore_index=255), the
loss segtune's training graphs compute.

Inputs:  --input   raw little-endian float32, shape --input-shape
         --target  raw little-endian int64, shape [N, H, W] of --input-shape
Outputs: PREFIX.f64   raw little-endian float64: the logits, then each
                      gradient, in the order of the index
         PREFIX.json  {"loss": float, "tensors": [{"name", "shape", "offset",
                      "count"}, ...]}; offsets and counts in elements; the
                      logits are named "logits", gradients "grad/<param>".

Needs Debian's python3-torch and python3-onnx (scripts/install-python-deps.sh).
"""
import argparse
import json
import math
import os
import sys
import warnings

warnings.filterwarnings("ignore", message="Failed to load image Python extension")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import numpy_helper  # noqa: E402

DTYPE = torch.float64


# ---------------------------------------------------------------- helpers

def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def s(v):
    """An ONNX string attribute as str."""
    return v.decode() if isinstance(v, bytes) else v


def ints(t):
    return [int(v) for v in t.reshape(-1).tolist()]


def present(x, i):
    """The i-th optional input, or None when absent or empty."""
    return x[i] if len(x) > i and x[i] is not None else None


def to_torch(arr):
    t = torch.from_numpy(np.array(arr, copy=True))
    return t.to(DTYPE) if t.is_floating_point() else t


def conv_pads(x, w, a):
    """ONNX Conv/pool padding as (F.pad amounts or None, symmetric pads)."""
    spatial = x.dim() - 2
    k = a.get("kernel_shape") or list(w.shape[2:])
    strides = a.get("strides", [1] * spatial)
    dil = a.get("dilations", [1] * spatial)
    auto = s(a.get("auto_pad", "NOTSET"))
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for d in range(spatial):
            n = x.shape[2 + d]
            out = -(-n // strides[d])
            total = max(0, (out - 1) * strides[d] + (k[d] - 1) * dil[d] + 1 - n)
            small, big = total // 2, total - total // 2
            b, e = (small, big) if auto == "SAME_UPPER" else (big, small)
            begin.append(b)
            end.append(e)
    elif auto == "VALID":
        begin = end = [0] * spatial
    else:
        assert auto == "NOTSET", auto
        pads = a.get("pads", [0] * 2 * spatial)
        begin, end = pads[:spatial], pads[spatial:]
    if list(begin) == list(end):
        return None, tuple(begin)
    # F.pad takes the last axis first: (w_begin, w_end, h_begin, h_end).
    amounts = []
    for d in reversed(range(spatial)):
        amounts += [begin[d], end[d]]
    return amounts, (0,) * spatial


# ---------------------------------------------------------------- operators
# Each takes the node's inputs (torch tensors, None for absent optional ones)
# and its attributes, and returns the list of outputs.

def op_conv(x, a):
    assert x[0].dim() == 4, "Conv: 2-D only"
    amounts, pads = conv_pads(x[0], x[1], a)
    inp = F.pad(x[0], amounts) if amounts else x[0]
    return [F.conv2d(inp, x[1], present(x, 2), tuple(a.get("strides", [1, 1])), pads,
                     tuple(a.get("dilations", [1, 1])), a.get("group", 1))]


def op_clip(x, a):
    lo, hi = present(x, 1), present(x, 2)
    lo = lo.item() if lo is not None else a.get("min")
    hi = hi.item() if hi is not None else a.get("max")
    return [torch.clamp(x[0], lo, hi)]


def op_hard_sigmoid(x, a):
    return [torch.clamp(a.get("alpha", 0.2) * x[0] + a.get("beta", 0.5), 0, 1)]


def op_hard_swish(x, a):
    return [x[0] * torch.clamp(x[0] / 6 + 0.5, 0, 1)]


def op_gemm(x, a):
    A = x[0].t() if a.get("transA", 0) else x[0]
    B = x[1].t() if a.get("transB", 0) else x[1]
    y = a.get("alpha", 1.0) * (A @ B)
    c = present(x, 2)
    return [y + a.get("beta", 1.0) * c if c is not None else y]


def op_pool(kind):
    def run(x, a):
        assert x[0].dim() == 4, f"{kind}: 2-D only"
        assert not a.get("ceil_mode", 0), f"{kind}: ceil_mode"
        k = a["kernel_shape"]
        amounts, pads = conv_pads(x[0], torch.empty(1, 1, *k), a)
        strides = tuple(a.get("strides", [1, 1]))
        if kind == "MaxPool":
            assert a.get("storage_order", 0) == 0
            inp = F.pad(x[0], amounts, value=-math.inf) if amounts else x[0]
            return [F.max_pool2d(inp, k, strides, pads, tuple(a.get("dilations", [1, 1])))]
        assert a.get("dilations", [1, 1]) == [1, 1], "AveragePool: dilations"
        inp = F.pad(x[0], amounts) if amounts else x[0]
        include = bool(a.get("count_include_pad", 0))
        if amounts and not include:
            raise NotImplementedError("AveragePool: asymmetric pads without count_include_pad")
        return [F.avg_pool2d(inp, k, strides, pads, count_include_pad=include)]
    return run


def op_shape(x, a):
    dims = list(x[0].shape)
    start, end = a.get("start", 0), a.get("end", len(dims))
    return [torch.tensor(dims[start:end], dtype=torch.int64)]


def op_gather(x, a):
    axis = a.get("axis", 0) % x[0].dim()
    idx = x[1] % x[0].shape[axis]  # negative indices count from the end
    out = torch.index_select(x[0], axis, idx.reshape(-1))
    return [out.reshape(x[0].shape[:axis] + idx.shape + x[0].shape[axis + 1:])]


def op_slice(x, a):
    if len(x) > 1:
        starts, ends = ints(x[1]), ints(x[2])
        axes = ints(x[3]) if present(x, 3) is not None else list(range(len(starts)))
        steps = ints(x[4]) if present(x, 4) is not None else [1] * len(starts)
    else:  # opset < 10: attributes
        starts, ends = a["starts"], a["ends"]
        axes, steps = a.get("axes", list(range(len(starts)))), [1] * len(starts)
    idx = [slice(None)] * x[0].dim()
    for st, en, ax, step in zip(starts, ends, axes, steps):
        assert step == 1, "Slice: steps != 1"
        n = x[0].shape[ax]
        st = min(max(st + n if st < 0 else st, 0), n)
        en = min(max(en + n if en < 0 else en, 0), n)
        idx[ax] = slice(st, en)
    return [x[0][tuple(idx)]]


def op_unsqueeze(x, a):
    axes = ints(x[1]) if len(x) > 1 else a["axes"]
    rank = x[0].dim() + len(axes)
    y = x[0]
    for ax in sorted(v % rank for v in axes):
        y = y.unsqueeze(ax)
    return [y]


def op_squeeze(x, a):
    axes = ints(x[1]) if present(x, 1) is not None else a.get("axes")
    if axes is None:
        return [x[0].squeeze()]
    y = x[0]
    for ax in sorted((v % y.dim() for v in axes), reverse=True):
        y = y.squeeze(ax)
    return [y]


def op_reshape(x, a):
    shape = ints(x[1])
    if not a.get("allowzero", 0):
        shape = [x[0].shape[i] if v == 0 else v for i, v in enumerate(shape)]
    return [x[0].reshape(shape)]


def op_flatten(x, a):
    axis = a.get("axis", 1) % max(x[0].dim(), 1)
    lead = int(np.prod(x[0].shape[:axis]))
    return [x[0].reshape(lead, -1)]


CAST = {onnx.TensorProto.FLOAT: DTYPE, onnx.TensorProto.DOUBLE: DTYPE,
        onnx.TensorProto.INT64: torch.int64, onnx.TensorProto.INT32: torch.int32}


def op_cast(x, a):
    return [x[0].to(CAST[a["to"]])]


def source_coords(out_len, in_len, scale, mode):
    """ONNX Resize: the input coordinate of each output index along one axis."""
    o = torch.arange(out_len, dtype=DTYPE)
    if mode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if out_len > 1 else torch.zeros(out_len, dtype=DTYPE)
    if mode == "align_corners":
        return o * (in_len - 1) / (out_len - 1) if out_len > 1 else torch.zeros(out_len, dtype=DTYPE)
    if mode == "asymmetric":
        return o / scale
    raise NotImplementedError(f"Resize: coordinate_transformation_mode {mode}")


def resize_axis(x, axis, out_len, scale, a):
    """Resizes x along one axis, by gathering and blending input rows."""
    in_len = x.shape[axis]
    mode = s(a.get("mode", "nearest"))
    coords = source_coords(out_len, in_len, scale, s(a.get("coordinate_transformation_mode", "half_pixel")))
    if mode == "nearest":
        rounding = s(a.get("nearest_mode", "round_prefer_floor"))
        if rounding == "floor":
            idx = torch.floor(coords)
        elif rounding == "ceil":
            idx = torch.ceil(coords)
        elif rounding == "round_prefer_floor":
            idx = torch.ceil(coords - 0.5)
        elif rounding == "round_prefer_ceil":
            idx = torch.floor(coords + 0.5)
        else:
            raise NotImplementedError(f"Resize: nearest_mode {rounding}")
        idx = idx.clamp(0, in_len - 1).long()
        return torch.index_select(x, axis, idx)
    if mode != "linear":
        raise NotImplementedError(f"Resize: mode {mode}")
    coords = coords.clamp(0, in_len - 1)
    lo = torch.floor(coords).long()
    hi = torch.clamp(lo + 1, max=in_len - 1)
    frac = coords - lo.to(DTYPE)
    shape = [1] * x.dim()
    shape[axis] = out_len
    frac = frac.reshape(shape)
    return torch.index_select(x, axis, lo) * (1 - frac) + torch.index_select(x, axis, hi) * frac


def op_resize(x, a):
    assert not a.get("exclude_outside", 0), "Resize: exclude_outside"
    if len(x) == 2:  # Upsample / Resize-10: (X, scales)
        scales, sizes = x[1].tolist(), None
    else:
        sc, sz = present(x, 2), present(x, 3)
        scales = sc.tolist() if sc is not None and sc.numel() else None
        sizes = ints(sz) if sz is not None and sz.numel() else None
    y = x[0]
    for axis in range(y.dim()):
        n = y.shape[axis]
        if sizes is not None:
            out_len, scale = sizes[axis], sizes[axis] / n
        else:
            out_len, scale = int(math.floor(n * scales[axis])), scales[axis]
        if out_len == n and scale == 1:
            continue
        y = resize_axis(y, axis, out_len, scale, a)
    return [y]


def op_concat(x, a):
    return [torch.cat(x, a["axis"])]


def op_constant(x, a):
    if "value" in a:
        return [to_torch(numpy_helper.to_array(a["value"]))]
    for key, dt in (("value_float", DTYPE), ("value_floats", DTYPE),
                    ("value_int", torch.int64), ("value_ints", torch.int64)):
        if key in a:
            return [torch.tensor(a[key], dtype=dt)]
    raise NotImplementedError(f"Constant: attributes {sorted(a)}")


def op_transpose(x, a):
    perm = a.get("perm") or list(reversed(range(x[0].dim())))
    return [x[0].permute(*perm)]


def op_softmax(x, a):
    return [torch.softmax(x[0], dim=a.get("axis", -1))]


def reduce_axes(x, a):
    """A Reduce* node's axes (attribute before opset 18, input after) or None for all."""
    axes = ints(x[1]) if present(x, 1) is not None else a.get("axes")
    if axes is None or (not axes and not a.get("noop_with_empty_axes", 0)):
        return list(range(x[0].dim()))
    return [v % x[0].dim() for v in axes]


def op_reduce_mean(x, a):
    return [x[0].mean(dim=reduce_axes(x, a), keepdim=bool(a.get("keepdims", 1)))]


def op_layer_norm(x, a):
    axis = a.get("axis", -1) % x[0].dim()
    dims = list(range(axis, x[0].dim()))
    mean = x[0].mean(dim=dims, keepdim=True)
    var = ((x[0] - mean) ** 2).mean(dim=dims, keepdim=True)
    y = (x[0] - mean) / torch.sqrt(var + a.get("epsilon", 1e-5)) * x[1]
    b = present(x, 2)
    return [y + b if b is not None else y]


def op_instance_norm(x, a):
    dims = list(range(2, x[0].dim()))
    mean = x[0].mean(dim=dims, keepdim=True)
    var = ((x[0] - mean) ** 2).mean(dim=dims, keepdim=True)
    shape = [1, -1] + [1] * len(dims)
    y = (x[0] - mean) / torch.sqrt(var + a.get("epsilon", 1e-5))
    return [y * x[1].reshape(shape) + x[2].reshape(shape)]


def op_expand(x, a):
    shape = ints(x[1])
    return [x[0] * torch.ones(shape, dtype=x[0].dtype)]


def op_constant_of_shape(x, a):
    v = a.get("value")
    val = to_torch(numpy_helper.to_array(v)) if v is not None else torch.zeros(1, dtype=DTYPE)
    return [val.reshape(-1)[0].expand(ints(x[0])).clone()]


def op_where(x, a):
    return [torch.where(x[0].bool(), x[1], x[2])]


def binary(fn):
    return lambda x, a: [fn(x[0], x[1])]


def unary(fn):
    return lambda x, a: [fn(x[0])]


OPS = {
    "Conv": op_conv,
    "Relu": unary(F.relu),
    "Clip": op_clip,
    "Sigmoid": unary(torch.sigmoid),
    "HardSigmoid": op_hard_sigmoid,
    "HardSwish": op_hard_swish,
    "Add": binary(torch.add),
    "Sub": binary(torch.sub),
    "Mul": binary(torch.mul),
    "Div": binary(torch.div),
    "MatMul": binary(torch.matmul),
    "Gemm": op_gemm,
    "GlobalAveragePool": unary(lambda t: t.mean(dim=tuple(range(2, t.dim())), keepdim=True)),
    "AveragePool": op_pool("AveragePool"),
    "MaxPool": op_pool("MaxPool"),
    "Concat": op_concat,
    "Resize": op_resize,
    "Upsample": op_resize,
    "Shape": op_shape,
    "Gather": op_gather,
    "Slice": op_slice,
    "Unsqueeze": op_unsqueeze,
    "Squeeze": op_squeeze,
    "Cast": op_cast,
    "Constant": op_constant,
    "Identity": unary(lambda t: t),
    "Reshape": op_reshape,
    "Flatten": op_flatten,
    "Transpose": op_transpose,
    "Softmax": op_softmax,
    "ReduceMean": op_reduce_mean,
    "LayerNormalization": op_layer_norm,
    "InstanceNormalization": op_instance_norm,
    "Pow": binary(torch.pow),
    "Sqrt": unary(torch.sqrt),
    "Erf": unary(torch.erf),
    "Expand": op_expand,
    "ConstantOfShape": op_constant_of_shape,
    "Where": op_where,
    "Equal": binary(torch.eq),
}


# ---------------------------------------------------------------- model

def run_graph(graph, env):
    """Evaluates the graph's nodes in order (ONNX requires topological order)."""
    for node in graph.node:
        fn = OPS.get(node.op_type)
        if fn is None or node.domain not in ("", "ai.onnx"):
            raise NotImplementedError(f"op {node.domain or 'ai.onnx'}.{node.op_type} ({node.name}) is not supported")
        x = [env[i] if i else None for i in node.input]
        outs = fn(x, attrs(node))
        for name, val in zip(node.output, outs):
            if name:
                env[name] = val
    return [env[o.name] for o in graph.output]


def loss_and_grads(model, x, target, params, ignore_index=255, input_name=None):
    """Runs the model on x, returns (loss, logits, {param: grad}), all float64."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    missing = [p for p in params if p not in inits]
    if missing:
        raise KeyError(f"not initializers: {missing}")
    env = {}
    leaves = {}
    for name, t in inits.items():
        v = to_torch(numpy_helper.to_array(t))
        if name in params:
            assert v.is_floating_point(), f"{name} is not a float initializer"
            v.requires_grad_(True)
            leaves[name] = v
        env[name] = v
    inputs = [i.name for i in g.input if i.name not in inits]
    env[input_name or inputs[0]] = x
    logits = run_graph(g, env)[0]
    loss = F.cross_entropy(logits, target, ignore_index=ignore_index, reduction="mean")
    grads = torch.autograd.grad(loss, [leaves[p] for p in params], allow_unused=True)
    grads = {p: (gr if gr is not None else torch.zeros_like(leaves[p])) for p, gr in zip(params, grads)}
    return loss.detach(), logits.detach(), grads


def write_result(prefix, loss, tensors):
    index, offset = [], 0
    with open(prefix + ".f64", "wb") as f:
        for name, t in tensors:
            a = t.detach().cpu().numpy().astype("<f8")
            f.write(a.tobytes())
            index.append({"name": name, "shape": list(a.shape), "offset": offset, "count": int(a.size)})
            offset += int(a.size)
    with open(prefix + ".json", "w") as f:
        json.dump({"loss": float(loss), "tensors": index}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True, help="raw little-endian float32")
    ap.add_argument("--input-shape", required=True, help="N,C,H,W")
    ap.add_argument("--input-name", help="the model input (default: the first non-initializer input)")
    ap.add_argument("--target", required=True, help="raw little-endian int64 [N,H,W]")
    ap.add_argument("--params", required=True, help="comma-separated initializer names")
    ap.add_argument("--ignore-index", type=int, default=255)
    ap.add_argument("--out", required=True, help="output prefix: writes PREFIX.f64 and PREFIX.json")
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    shape = [int(v) for v in args.input_shape.split(",")]
    x = torch.from_numpy(np.fromfile(args.input, dtype="<f4").reshape(shape)).to(DTYPE)
    target = torch.from_numpy(np.fromfile(args.target, dtype="<i8").reshape([shape[0]] + shape[2:]))
    params = [p for p in args.params.split(",") if p]
    model = onnx.load(args.model)
    loss, logits, grads = loss_and_grads(model, x, target, params, args.ignore_index, args.input_name)
    write_result(args.out, loss, [("logits", logits)] + [("grad/" + p, grads[p]) for p in params])
    print(f"torch_grads: {os.path.basename(args.model)} loss {float(loss):.10g}, {len(params)} gradients",
          file=sys.stderr)


if __name__ == "__main__":
    main()
