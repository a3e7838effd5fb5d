"""Writes labelme_reference.json: LabelMe shapes and the class masks that
LabelMe's own conversion draws from them, for the tests of package annot.

The masks are drawn as labelme/utils/shape.py (shape_to_mask, with its
defaults line_width=10 and point_size=5) draws each shape with Pillow's
ImageDraw, and painted in order as shapes_to_label does for
examples/semantic_segmentation/labelme2voc.py (later shapes over earlier
ones). labelme itself is not needed: the calls below are the ones
shape_to_mask makes.

    python3 gen_labelme_reference.py > labelme_reference.json
"""
import json
import math
import random
import sys

import numpy as np
import PIL
from PIL import Image, ImageDraw


def shape_to_mask(h, w, points, shape_type):
    mask = Image.fromarray(np.zeros((h, w), dtype=np.uint8))
    draw = ImageDraw.Draw(mask)
    xy = [tuple(p) for p in points]
    if shape_type == "circle":
        (cx, cy), (px, py) = xy
        d = math.sqrt((cx - px) ** 2 + (cy - py) ** 2)
        draw.ellipse([cx - d, cy - d, cx + d, cy + d], outline=1, fill=1)
    elif shape_type == "rectangle":
        draw.rectangle(xy, outline=1, fill=1)
    elif shape_type in ("line", "linestrip"):
        draw.line(xy=xy, fill=1, width=10)
    elif shape_type == "point":
        cx, cy = xy[0]
        r = 5
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], outline=1, fill=1)
    else:
        draw.polygon(xy=xy, outline=1, fill=1)
    return np.array(mask, dtype=bool)


def paint(h, w, shapes):
    cls = np.zeros((h, w), dtype=np.uint8)
    for s in shapes:
        cls[shape_to_mask(h, w, s["points"], s["shape_type"])] = s["class"]
    return ["".join(str(v) for v in row) for row in cls]


rng = random.Random(18)
cases = []


def case(name, h, w, shapes):
    cases.append({"name": name, "h": h, "w": w, "shapes": shapes, "mask": paint(h, w, shapes)})


def one(name, h, w, shape_type, points):
    case(name, h, w, [{"class": 1, "shape_type": shape_type, "points": points}])


one("convex on pixel centres", 10, 12, "polygon", [[2, 2], [7, 2], [7, 6], [2, 6]])
one("convex on pixel edges", 10, 12, "polygon", [[1.5, 1.5], [7.5, 1.5], [7.5, 6.5], [1.5, 6.5]])
one("triangle", 9, 11, "polygon", [[0.3, 0.2], [10.2, 4.6], [2.1, 8.7]])
one("concave arrow", 16, 16, "polygon", [[1, 1], [14, 8], [1, 14], [6, 8]])
one("concave comb", 12, 20, "polygon", [[0, 11], [0, 0], [4, 0], [4, 7], [8, 7], [8, 0], [12, 0], [12, 7], [16, 7], [16, 0], [19, 0], [19, 11]])
one("self-touching figure eight", 13, 13, "polygon", [[1, 1], [6, 6], [11, 1], [11, 11], [6, 6], [1, 11]])
one("self-intersecting bow tie", 12, 12, "polygon", [[1, 1], [10, 10], [10, 1], [1, 10]])
one("star", 21, 21, "polygon", [[10, 0.5], [13, 20], [0.5, 7.5], [19.5, 7.5], [7, 20]])
one("sub-pixel sliver", 7, 30, "polygon", [[0.2, 3.1], [29.7, 3.3], [29.6, 3.35], [0.1, 3.2]])
one("sub-pixel triangle", 6, 6, "polygon", [[2.2, 2.3], [2.6, 2.4], [2.4, 2.7]])
one("halves round away from zero", 8, 8, "polygon", [[0.5, 0.5], [5.5, 1.5], [4.5, 6.5], [-0.5, 4.5]])
one("partly outside the image", 8, 8, "polygon", [[-3, -2], [6, -1], [11, 5], [4, 12], [-2, 6]])
one("horizontal runs", 10, 14, "polygon", [[1, 1], [5, 1], [9, 1], [12, 1], [12, 8], [6, 8], [1, 8]])
one("rectangle", 8, 10, "rectangle", [[1.7, 1.2], [6.6, 5.9]])
one("rectangle drawn backwards", 8, 10, "rectangle", [[8.2, 6.4], [2.5, 0.6]])
one("rectangle over the edge", 8, 10, "rectangle", [[-2.3, 3.5], [12.1, 9.9]])
one("circle", 20, 20, "circle", [[9.5, 10.2], [15.1, 12.7]])
one("small circle", 9, 9, "circle", [[4, 4], [5, 4]])
one("circle over the edge", 12, 15, "circle", [[1.2, 2.7], [6.9, 3.3]])
one("line", 20, 30, "line", [[2.5, 3.5], [27.2, 15.8]])
one("vertical line", 20, 30, "line", [[10, 2], [10, 17]])
one("linestrip", 24, 30, "linestrip", [[2, 2], [25, 4], [12, 20], [28, 22]])
one("point", 14, 14, "point", [[6.3, 7.6]])
case("overlap in order", 16, 20, [
    {"class": 1, "shape_type": "rectangle", "points": [[1, 1], [15, 12]]},
    {"class": 2, "shape_type": "polygon", "points": [[8, 3], [18, 5], [12, 14]]},
    {"class": 3, "shape_type": "circle", "points": [[5, 10], [8, 10]]},
    {"class": 1, "shape_type": "polygon", "points": [[10, 6], [13, 6], [13, 9], [10, 9]]},
])

for n in range(200):
    h, w = rng.randint(1, 40), rng.randint(1, 40)
    k = rng.randint(3, 16)
    pts = [[round(rng.uniform(-min(3, w), w + min(3, w)), rng.choice([0, 1, 2, 6])),
            round(rng.uniform(-min(3, h), h + min(3, h)), rng.choice([0, 1, 2, 6]))] for _ in range(k)]
    one(f"random polygon {n}", h, w, "polygon", pts)
for n in range(60):
    h, w = rng.randint(1, 40), rng.randint(1, 40)
    c = [round(rng.uniform(0, w), 2), round(rng.uniform(0, h), 2)]
    r = min(w, h)
    p = [round(c[0] + rng.uniform(-r, r), 2), round(c[1] + rng.uniform(-r, r), 2)]
    one(f"random circle {n}", h, w, "circle", [c, p])
    a = [round(rng.uniform(-min(2, w), w + min(2, w)), 2), round(rng.uniform(-min(2, h), h + min(2, h)), 2)]
    b = [round(rng.uniform(-min(2, w), w + min(2, w)), 2), round(rng.uniform(-min(2, h), h + min(2, h)), 2)]
    one(f"random rectangle {n}", h, w, "rectangle", [a, b])
    one(f"random line {n}", h, w, "line", [a, b])

json.dump({"pillow": PIL.__version__, "cases": cases}, sys.stdout, separators=(",", ":"))
