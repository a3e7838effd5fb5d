"""Writes coco_reference.json: masks, RLE strings and a COCO file rasterised
by COCO's reference code, for the tests of package annot.

The reference is maskApi.c of github.com/cocodataset/cocoapi (common/),
the C code under pycocotools, built as a shared library and called through
ctypes (the fork PyPI's pycocotools is built from, github.com/ppwwyyxx/cocoapi,
has the same rleFrPoly, rleToString and rleFrString):

    gcc -O2 -shared -fPIC -o libmaskapi.so maskApi.c
    python3 gen_coco_reference.py ./libmaskapi.so > coco_reference.json

Annotations are turned into masks as pycocotools' COCO.annToMask does
(polygons of one annotation merged, uncompressed RLE read as counts,
compressed RLE as a string), then painted in order: class of the
category (sorted ids, 0 = background), crowd regions 255.
"""
import ctypes
import json
import random
import sys

import numpy as np

lib = ctypes.CDLL(sys.argv[1])


class RLE(ctypes.Structure):
    _fields_ = [("h", ctypes.c_size_t), ("w", ctypes.c_size_t),
                ("m", ctypes.c_size_t), ("cnts", ctypes.POINTER(ctypes.c_uint))]


lib.rleToString.restype = ctypes.c_void_p
lib.free = ctypes.CDLL(None).free


def counts(r):
    return [r.cnts[i] for i in range(r.m)]


def to_string(r):
    p = lib.rleToString(ctypes.byref(r))
    s = ctypes.cast(p, ctypes.c_char_p).value.decode()
    ctypes.CDLL(None).free(ctypes.c_void_p(p))
    return s


def fr_poly(xy, h, w):
    r = RLE()
    arr = (ctypes.c_double * len(xy))(*xy)
    lib.rleFrPoly(ctypes.byref(r), arr, ctypes.c_size_t(len(xy) // 2), ctypes.c_size_t(h), ctypes.c_size_t(w))
    return r


def fr_string(s, h, w):
    r = RLE()
    lib.rleFrString(ctypes.byref(r), ctypes.c_char_p(s.encode()), ctypes.c_size_t(h), ctypes.c_size_t(w))
    return r


def encode(mask):
    """mask: h×w uint8 → RLE (column-major, as pycocotools wants)."""
    h, w = mask.shape
    f = np.asfortranarray(mask.astype(np.uint8))
    r = RLE()
    lib.rleEncode(ctypes.byref(r), f.ctypes.data_as(ctypes.POINTER(ctypes.c_ubyte)),
                  ctypes.c_size_t(h), ctypes.c_size_t(w), ctypes.c_size_t(1))
    return r


def decode(r):
    h, w = r.h, r.w
    buf = (ctypes.c_ubyte * (h * w))()
    lib.rleDecode(ctypes.byref(r), buf, ctypes.c_size_t(1))
    return np.frombuffer(bytes(buf), dtype=np.uint8).reshape((w, h)).T


def rows(mask):
    return ["".join("1" if v else "0" for v in row) for row in mask]


rng = random.Random(28)

# Polygons: hand-picked edge cases, then random ones.
polys = [
    ("square on pixel centres", 10, 12, [2, 2, 7, 2, 7, 6, 2, 6]),
    ("square on pixel edges", 10, 12, [1.5, 1.5, 7.5, 1.5, 7.5, 6.5, 1.5, 6.5]),
    ("triangle", 9, 11, [0.3, 0.2, 10.2, 4.6, 2.1, 8.7]),
    ("self-intersecting bow tie", 12, 12, [1, 1, 10, 10, 10, 1, 1, 10]),
    ("five-pointed star (even-odd centre hole)", 21, 21,
     [10, 0.5, 13, 20, 0.5, 7.5, 19.5, 7.5, 7, 20]),
    ("partly outside the image", 8, 8, [-3, -2, 6, -1, 11, 5, 4, 12, -2, 6]),
    ("duplicate vertices", 10, 10, [1, 1, 1, 1, 8, 1, 8, 8, 8, 8, 1, 8]),
    ("one point", 6, 6, [2.4, 3.1]),
    ("two points", 6, 6, [0.5, 0.5, 5.5, 5.5]),
    ("thin sliver", 7, 30, [0.2, 3.1, 29.7, 3.3, 29.6, 3.35, 0.1, 3.2]),
    ("one pixel image", 1, 1, [-0.5, -0.5, 0.5, -0.5, 0.5, 0.5, -0.5, 0.5]),
    ("quarter coordinates", 13, 9, [0.25, 0.75, 8.25, 0.25, 8.75, 12.25, 0.75, 12.75]),
]
for n in range(40):
    h, w = rng.randint(1, 40), rng.randint(1, 40)
    k = rng.randint(3, 25)
    xy = []
    for _ in range(k):
        xy += [round(rng.uniform(-3, w + 3), rng.choice([0, 1, 2, 6])),
               round(rng.uniform(-3, h + 3), rng.choice([0, 1, 2, 6]))]
    polys.append((f"random {n}", h, w, xy))
poly_cases = []
for name, h, w, xy in polys:
    r = fr_poly(xy, h, w)
    poly_cases.append({"name": name, "h": h, "w": w, "xy": xy, "counts": counts(r),
                       "string": to_string(r), "mask": rows(decode(r))})

# Masks → RLE strings, and the strings decoded back by the reference.
rle_cases = []
for n in range(30):
    h, w = rng.randint(1, 60), rng.randint(1, 60)
    kind = n % 3
    if kind == 0:
        m = (np.random.default_rng(n).random((h, w)) < 0.5)
    elif kind == 1:
        m = np.zeros((h, w), bool)
        m[rng.randint(0, h - 1):, rng.randint(0, w - 1):] = True
    else:
        m = np.ones((h, w), bool) if n % 2 else np.zeros((h, w), bool)
    r = encode(m.astype(np.uint8))
    s = to_string(r)
    back = fr_string(s, h, w)
    assert counts(back) == counts(r)
    assert (decode(back) == m).all()
    rle_cases.append({"h": h, "w": w, "counts": counts(r), "string": s, "mask": rows(m)})
# Large runs: several characters per count, negative differences.
big = np.zeros((300, 400), bool)
big[:, 7:390] = True
big[100:220, 50:51] = False
r = encode(big.astype(np.uint8))
rle_cases.append({"h": 300, "w": 400, "counts": counts(r), "string": to_string(r), "mask": None})

# A COCO instances file: sparse category ids, overlapping instances, a
# crowd region as uncompressed RLE, a compressed RLE, multi-part polygons.
H, W = 24, 32
crowd = np.zeros((H, W), np.uint8)
crowd[2:9, 20:30] = 1
blob = np.zeros((H, W), np.uint8)
blob[14:22, 3:12] = 1
blob[16:19, 6:9] = 0
crowd_r, blob_r = encode(crowd), encode(blob)
coco = {
    "info": {"description": "segtune test"},
    "images": [{"id": 7, "file_name": "a.jpg", "width": W, "height": H},
               {"id": 9, "file_name": "sub/b.jpg", "width": 10, "height": 8}],
    "categories": [{"id": 90, "name": "toothbrush", "supercategory": "x"},
                   {"id": 1, "name": "person", "supercategory": "x"},
                   {"id": 18, "name": "dog", "supercategory": "x"}],
    "annotations": [
        {"id": 101, "image_id": 7, "category_id": 1, "iscrowd": 0, "area": 1, "bbox": [0, 0, 1, 1],
         "segmentation": [[1.2, 1.4, 16.8, 2.1, 15.3, 12.6, 2.4, 11.9], [25.5, 15.5, 30.5, 15.5, 28, 22.5]]},
        {"id": 102, "image_id": 7, "category_id": 18, "iscrowd": 0, "area": 1, "bbox": [0, 0, 1, 1],
         "segmentation": [[8.4, 6.2, 22.7, 7.9, 19.1, 18.8, 9.6, 16.4]]},
        {"id": 103, "image_id": 7, "category_id": 90, "iscrowd": 1, "area": 1, "bbox": [0, 0, 1, 1],
         "segmentation": {"size": [H, W], "counts": counts(crowd_r)}},
        {"id": 104, "image_id": 7, "category_id": 90, "iscrowd": 0, "area": 1, "bbox": [0, 0, 1, 1],
         "segmentation": {"size": [H, W], "counts": to_string(blob_r)}},
    ],
}
cls = {1: 1, 18: 2, 90: 3}
expect = np.zeros((H, W), np.uint8)
for a in coco["annotations"]:
    seg = a["segmentation"]
    if isinstance(seg, list):
        m = np.zeros((H, W), bool)
        for p in seg:
            m |= decode(fr_poly(p, H, W)).astype(bool)
    elif isinstance(seg["counts"], list):
        r = RLE()
        c = (ctypes.c_uint * len(seg["counts"]))(*seg["counts"])
        lib.rleInit(ctypes.byref(r), ctypes.c_size_t(H), ctypes.c_size_t(W), ctypes.c_size_t(len(seg["counts"])), c)
        m = decode(r).astype(bool)
    else:
        m = decode(fr_string(seg["counts"], H, W)).astype(bool)
    expect[m] = 255 if a["iscrowd"] else cls[a["category_id"]]

json.dump({"polygons": poly_cases, "rle": rle_cases,
           "coco": {"file": coco, "classes": ["background", "person", "dog", "toothbrush"],
                    "masks": {"a.jpg": [list(map(int, row)) for row in expect],
                              "sub/b.jpg": [[0] * 10 for _ in range(8)]}}},
          sys.stdout, separators=(",", ":"))
