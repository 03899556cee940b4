#!/usr/bin/python3
"""Writes the fixtures tests/lua/test_state.lua reads, with an implementation independent of
moongrad: numpy for the bytes and Python's json for the header, following the safetensors
spec (8-byte little-endian header size, JSON header, raw little-endian data), plus a gzipped
IDX file. Run with Debian's python3 (python3-numpy): /usr/bin/python3 tests/data/make_fixtures.py
"""
import gzip, json, os, struct
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))

tensors = {
    "a": np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5,
    "b": np.array([-3, 2**40, 7], dtype=np.int64),
    "c": np.array([0, 255, 17], dtype=np.uint8),
    "d": np.array([1.5, -2.25, 65504], dtype=np.float16),
    "e": np.array([True, False, True], dtype=np.bool_),
    "f": np.array(3.25, dtype=np.float64),
}
codes = {np.float32: "F32", np.int64: "I64", np.uint8: "U8", np.float16: "F16", np.bool_: "BOOL", np.float64: "F64"}
header, blobs, off = {"__metadata__": {"writer": "numpy"}}, [], 0
for name in sorted(tensors, reverse=True):  # not moongrad's order, on purpose
    arr = tensors[name]
    raw = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
    header[name] = {"dtype": codes[arr.dtype.type], "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
    blobs.append(raw)
    off += len(raw)
h = json.dumps(header).encode()
with open(os.path.join(here, "numpy_fixture.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

# a 3x2x2 uint8 IDX image file, gzipped, and its labels plain
imgs = np.arange(12, dtype=np.uint8).reshape(3, 2, 2) * 20
with gzip.open(os.path.join(here, "tiny-images-idx3-ubyte.gz"), "wb") as f:
    f.write(struct.pack(">HBB", 0, 0x08, 3) + struct.pack(">III", 3, 2, 2) + imgs.tobytes())
with open(os.path.join(here, "tiny-labels-idx1-ubyte"), "wb") as f:
    f.write(struct.pack(">HBB", 0, 0x08, 1) + struct.pack(">I", 3) + bytes([7, 0, 9]))
print("fixtures written to", here)
