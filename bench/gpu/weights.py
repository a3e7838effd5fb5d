#!/usr/bin/python3
"""Ships generated models to a GPU machine without their weights, and puts them back there.

    python3 bench/gpu/weights.py strip IN.onnx OUT.onnx
    python3 bench/gpu/weights.py fill  IN.onnx OUT.onnx --model mobilenetv2

A lent GPU machine takes 64 MiB a call; ResNet-18's DeepLabV3+ alone is 66 MB
of random float32 that compresses to nearly as much. `strip` empties every
float initializer of more than 64 elements (its name, type and dims stay);
`fill` rebuilds the same weights there from scripts/gen_torch_models.py
(torch.manual_seed and BatchNorm folding are deterministic: the values are the
exporter's), by parameter name, and fails if any emptied initializer has no
parameter of the same name and shape. The check itself compares the filled
model with the PyTorch model it came from (max |difference| of the weights).
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

MIN_ELEMS = 64


def strip(src, dst):
    m = onnx.load(src)
    emptied = 0
    for t in m.graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT and int(np.prod(t.dims)) > MIN_ELEMS:
            t.ClearField("raw_data")
            t.ClearField("float_data")
            t.doc_string = "stripped"
            emptied += 1
    onnx.save(m, dst)
    print(f"{dst}: {emptied} initializers emptied, {os.path.getsize(dst)} bytes")


def fill(src, dst, model):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
    import gen_torch_models as gen
    import torch

    net = gen.build_folded_model(model, 2)
    params = {n: p.detach().cpu().numpy().astype(np.float32) for n, p in net.named_parameters()}
    m = onnx.load(src)
    filled, worst = 0, 0.0
    for i, t in enumerate(m.graph.initializer):
        if t.doc_string != "stripped":
            continue
        p = params.get(t.name)
        if p is None or list(p.shape) != list(t.dims):
            raise SystemExit(f"{src}: no parameter {t.name} of shape {list(t.dims)} in the PyTorch {model}")
        new = numpy_helper.from_array(p, t.name)
        m.graph.initializer[i].CopyFrom(new)
        filled += 1
    onnx.save(m, dst)
    print(f"{dst}: {filled} initializers filled from PyTorch {torch.__version__}'s {model}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("strip", "fill"))
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--model")
    a = ap.parse_args()
    if a.mode == "strip":
        strip(a.src, a.dst)
    else:
        if not a.model:
            ap.error("fill needs --model")
        fill(a.src, a.dst, a.model)


if __name__ == "__main__":
    main()
