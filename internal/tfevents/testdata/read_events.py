#!/usr/bin/python3
"""Reads a TensorBoard event file independently of package tfevents.

    /usr/bin/python3 read_events.py FILE

Checks the TFRecord framing (length, masked CRC-32C of the length and of the
data, computed here bit by bit), decodes each record as tensorflow.Event with
Python's protobuf library (descriptors for the fields of event.proto and
summary.proto built here, no generated code), and prints the events as JSON.
"""
import json
import math
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def classes():
    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="tfevents_check.proto", package="tensorflow", syntax="proto3")

    def msg(name, fields):
        m = fd.message_type.add(name=name)
        for fname, num, typ, type_name in fields:
            f = m.field.add(name=fname, number=num, type=typ, label=F.LABEL_OPTIONAL)
            if type_name:
                f.type_name = type_name
        return m

    msg("Image", [("height", 1, F.TYPE_INT32, None), ("width", 2, F.TYPE_INT32, None),
                  ("colorspace", 3, F.TYPE_INT32, None), ("encoded_image_string", 4, F.TYPE_BYTES, None)])
    msg("Value", [("tag", 1, F.TYPE_STRING, None), ("simple_value", 2, F.TYPE_FLOAT, None),
                  ("image", 4, F.TYPE_MESSAGE, ".tensorflow.Image")])
    s = msg("Summary", [])
    s.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".tensorflow.Value")
    msg("SessionLog", [("status", 1, F.TYPE_INT32, None)])
    msg("Event", [("wall_time", 1, F.TYPE_DOUBLE, None), ("step", 2, F.TYPE_INT64, None),
                  ("file_version", 3, F.TYPE_STRING, None), ("summary", 5, F.TYPE_MESSAGE, ".tensorflow.Summary"),
                  ("session_log", 6, F.TYPE_MESSAGE, ".tensorflow.SessionLog")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    desc = pool.FindMessageTypeByName("tensorflow.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def main():
    Event = classes()
    data = open(sys.argv[1], "rb").read()
    out, i = [], 0
    while i < len(data):
        if len(data) - i < 12:
            raise SystemExit(f"truncated record header at byte {i}")
        head = data[i:i + 8]
        (n,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", data[i + 8:i + 12])
        if hcrc != masked(head):
            raise SystemExit(f"bad length CRC at byte {i}")
        body = data[i + 12:i + 12 + n]
        (bcrc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        if len(body) != n or bcrc != masked(body):
            raise SystemExit(f"bad data CRC at byte {i}")
        i += 16 + n
        ev = Event()
        ev.ParseFromString(body)
        e = {"wall_time": ev.wall_time, "step": ev.step}
        if ev.file_version:
            e["file_version"] = ev.file_version
        if ev.HasField("summary"):
            vals = []
            for v in ev.summary.value:
                if v.HasField("image"):
                    vals.append({"tag": v.tag, "image": {"height": v.image.height, "width": v.image.width,
                                                          "colorspace": v.image.colorspace,
                                                          "bytes": len(v.image.encoded_image_string),
                                                          "png": v.image.encoded_image_string[:8].hex()}})
                else:
                    x = v.simple_value  # JSON has no infinities: those as "inf", "-inf", "nan"
                    vals.append({"tag": v.tag, "simple_value": x if math.isfinite(x) else str(x)})
            e["summary"] = vals
        if ev.HasField("session_log"):
            e["session_log"] = ev.session_log.status
        out.append(e)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
