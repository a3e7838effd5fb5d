"""Writes voc_palette_mask.png: a 6x2 Pascal VOC-style SegmentationClass mask.

An 8-bit palette PNG (colour type 3) with VOC's 256-colour palette, as
VOC's devkit writes them, assembled chunk by chunk with the standard
library only (no imaging library), so segtune's reader is checked against
a writer it does not share. Row 0 holds indices 0 1 15 20 255 255 (255 is
VOC's border/ignore colour), row 1 holds 7 7 0 0 3 255.
"""
import struct
import zlib


def voc_palette():
    pal = []
    for i in range(256):
        r = g = b = 0
        c = i
        for j in range(8):
            r |= ((c >> 0) & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        pal += [r, g, b]
    return bytes(pal)


def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


rows = [[0, 1, 15, 20, 255, 255], [7, 7, 0, 0, 3, 255]]
raw = b"".join(b"\x00" + bytes(r) for r in rows)  # filter type 0 per row
png = b"\x89PNG\r\n\x1a\n"
png += chunk(b"IHDR", struct.pack(">IIBBBBB", 6, 2, 8, 3, 0, 0, 0))
png += chunk(b"PLTE", voc_palette())
png += chunk(b"IDAT", zlib.compress(raw, 9))
png += chunk(b"IEND", b"")
with open("voc_palette_mask.png", "wb") as f:
    f.write(png)
