#!/usr/bin/python3
"""Write small segmenters exported the way older exporters wrote them, for the old-export tests
(deploy/legacy_test.go: fp16, int8 and --opset exports of each, checked by ONNX Runtime):

    /usr/bin/python3 scripts/gen_legacy_models.py --out testdata/generated/legacy

torch.onnx.export (Debian's python3-torch) of one 3-class network, Conv-ReLU6-BatchNorm-MaxPool-
Conv-interpolate(nearest, to 48x64), input 1x3x48x64, random weights from torch.manual_seed(0),
without constant folding, keep_initializers_as_inputs=True:
  legacy_op7_ir3.onnx   opset 7 (Upsample with a scales attribute, Clip with min/max attributes,
                        BatchNormalization-7), IR version rewritten to 3 as keras2onnx wrote it
  legacy_op9.onnx       opset 9 (Upsample with a scales input, from a Constant node)
Idempotent: existing files are kept (--force rebuilds).
"""
import argparse
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 3, 1)

    def forward(self, x):
        x = F.max_pool2d(self.bn1(F.relu6(self.conv1(x))), 2)  # BN after ReLU6: not folded into the Conv
        return F.interpolate(self.conv2(x), size=(48, 64), mode="nearest")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    net = Net()
    with torch.no_grad():
        net.bn1.running_mean.uniform_(-0.2, 0.2)
        net.bn1.running_var.uniform_(0.5, 1.5)
    net.eval()
    x = torch.rand(1, 3, 48, 64)
    for name, opset, ir in (("legacy_op7_ir3", 7, 3), ("legacy_op9", 9, None)):
        path = os.path.join(args.out, name + ".onnx")
        if os.path.exists(path) and not args.force:
            continue
        tmp = path + ".tmp"
        torch.onnx.export(net, x, tmp, opset_version=opset, input_names=["input"], output_names=["logits"],
                          do_constant_folding=False, keep_initializers_as_inputs=True)
        m = onnx.load(tmp)
        if ir is not None:
            m.ir_version = ir
        inits = {t.name for t in m.graph.initializer}
        listed = {i.name for i in m.graph.input}
        if not inits or not inits <= listed:
            sys.exit("%s: the export does not list its initializers as inputs" % name)
        ops = {n.op_type for n in m.graph.node}
        if "Upsample" not in ops or "BatchNormalization" not in ops:
            sys.exit("%s: want Upsample and BatchNormalization, got %s" % (name, sorted(ops)))
        onnx.save(m, tmp)
        os.replace(tmp, path)
        print("wrote %s: opset %d, IR %d, %s" % (path, opset, m.ir_version, ", ".join(sorted(ops))))


if __name__ == "__main__":
    main()
