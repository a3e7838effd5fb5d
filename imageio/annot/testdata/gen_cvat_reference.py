"""Writes cvat/, a CVAT "Segmentation mask 1.1" export as CVAT (Datumaro's
VOC writer) lays it out: labelmap.txt, ImageSets/Segmentation/default.txt,
RGB colour masks in SegmentationClass/ (and instance masks in
SegmentationObject/), images in JPEGImages/; plus cvat_expected.json, the
class index of each pixel.

    python3 gen_cvat_reference.py
"""
import json
import os

import numpy as np
from PIL import Image

labels = [("background", (0, 0, 0)), ("car", (250, 50, 83)), ("person", (36, 179, 83)),
          ("road sign", (255, 204, 51))]
os.makedirs("cvat/ImageSets/Segmentation", exist_ok=True)
with open("cvat/labelmap.txt", "w") as f:
    f.write("# label:color_rgb:parts:actions\n")
    for name, (r, g, b) in labels:
        f.write(f"{name}:{r},{g},{b}::\n")

expected = {}
rng = np.random.default_rng(28)
for stem, (h, w) in {"frame_000000": (12, 16), "sub/frame_000001": (9, 7)}.items():
    cls = np.zeros((h, w), np.uint8)
    cls[2:7, 3:10] = 1
    cls[5:h, w // 2:] = 2
    cls[0, 0] = 3
    rgb = np.array([c for _, c in labels], np.uint8)[cls]
    for d in ("SegmentationClass", "SegmentationObject", "JPEGImages"):
        os.makedirs(os.path.dirname(f"cvat/{d}/{stem}"), exist_ok=True)
    Image.fromarray(rgb, "RGB").save(f"cvat/SegmentationClass/{stem}.png")
    inst = np.zeros((h, w, 3), np.uint8)
    inst[cls > 0] = (128, 0, 0)
    Image.fromarray(inst, "RGB").save(f"cvat/SegmentationObject/{stem}.png")
    Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8), "RGB").save(f"cvat/JPEGImages/{stem}.jpg")
    expected[stem] = ["".join(str(v) for v in row) for row in cls]
with open("cvat/ImageSets/Segmentation/default.txt", "w") as f:
    f.write("\n".join(expected) + "\n")
with open("cvat_expected.json", "w") as f:
    json.dump({"classes": [n for n, _ in labels], "masks": expected}, f)
