#!/usr/bin/env python3
"""Writes each harness's seed corpus: small valid files of its format (and a few near-misses).

usage: make_seeds.py OUT   ->  OUT/<harness>/corpus/<seed files>
The harness names are those of fuzz/fuzz_<harness>.cpp; how each splits its input is described there.
"""
import gzip
import json
import os
import struct
import sys
import zlib


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)] -> the file's bytes (header padded to 8)."""
    header, offset, payload = {}, 0, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        payload += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + payload


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def f64(v):
    return struct.pack("<d", v)


def i64(v):
    return struct.pack("<q", v)


# The harnesses' model: Sequential(Linear(4, 3), BatchNorm2d(3)).
MODEL = [("0.weight", "F32", [3, 4], f32(*[0.1 * i for i in range(12)])), ("0.bias", "F32", [3], f32(0, 1, 2)),
         ("1.weight", "F32", [3], f32(1, 1, 1)), ("1.bias", "F32", [3], f32(0, 0, 0)),
         ("1.running_mean", "F32", [3], f32(0, 0, 0)), ("1.running_var", "F32", [3], f32(1, 1, 1)),
         ("1.num_batches_tracked", "I64", [], i64(0))]
SHAPES = {"0.weight": [3, 4], "0.bias": [3], "1.weight": [3], "1.bias": [3]}


def train_state():
    """AdamW's state after one step and an enabled GradScaler's, as train/checkpoint.cpp names them."""
    t = [("optimizer.step", "I64", [], i64(1)), ("optimizer.param_groups.0.num_params", "I64", [], i64(4))]
    for k, v in [("lr", 1e-3), ("weight_decay", 1e-2), ("momentum", 0), ("dampening", 0), ("beta1", 0.9),
                 ("beta2", 0.999), ("eps", 1e-8)]:
        t.append(("optimizer.param_groups.0." + k, "F64", [], f64(v)))
    for i, shape in enumerate(SHAPES.values()):
        n = 1
        for d in shape:
            n *= d
        t.append(("optimizer.state.%d.step" % i, "I64", [], i64(1)))
        t.append(("optimizer.state.%d.exp_avg" % i, "F32", shape, f32(*[0.01] * n)))
        t.append(("optimizer.state.%d.exp_avg_sq" % i, "F32", shape, f32(*[0.001] * n)))
    for k, v in [("scale", 65536.0), ("growth_factor", 2.0), ("backoff_factor", 0.5)]:
        t.append(("scaler." + k, "F64", [], f64(v)))
    for k, v in [("growth_interval", 2000), ("_growth_tracker", 3), ("skipped_steps", 0)]:
        t.append(("scaler." + k, "I64", [], i64(v)))
    return t


def idx(dims, payload):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


def idx_pair(n, h, w, c=None, compress=False):
    """fuzz_idx's input: u16 length of the labels file, the labels file, the images file."""
    dims = [n, h, w] + ([c] if c else [])
    size = n * h * w * (c or 1)
    images = idx(dims, bytes(i % 251 for i in range(size)))
    labels = idx([n], bytes(i % 10 for i in range(n)))
    if compress:
        images, labels = gzip.compress(images, mtime=0), gzip.compress(labels, mtime=0)
    return struct.pack("<H", len(labels)) + labels + images


def cifar(records):
    return b"".join(bytes([r % 10]) + bytes((r + i) % 256 for i in range(3072)) for r in range(records))


def cifar100(records):
    return b"".join(bytes([r % 20, (r * 7) % 100]) + bytes((r + i) % 256 for i in range(3072)) for r in range(records))


def tensor_record(dtype, shape, raw):
    """A tensor in a cache record: dtype byte (mdl's DType order), dim byte, u64 dims, data."""
    return bytes([dtype, len(shape)]) + b"".join(struct.pack("<Q", d) for d in shape) + raw


F32_CODE, I64_CODE, U8_CODE = 0, 5, 6


def sample_record(h=2, w=2):
    return b"S" + tensor_record(U8_CODE, [h, w, 1], bytes(range(h * w))) + tensor_record(I64_CODE, [], i64(3))


def fnv1a(text):
    h = 0xcbf29ce484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001b3) % 2**64
    return h


def cache_file(records, key="fuzz"):
    """fuzz_cache_file's input: the dataset size byte, then a complete cache file (see data/cache.cpp)."""
    body, index = b"", b""
    for r in records:
        index += struct.pack("<QQQ", len(body), len(r), zlib.crc32(r))
        body += r
    footer = b"MDLCACHE" + struct.pack("<QQQQQ", 3, len(records), len(body), fnv1a(key), zlib.crc32(index))
    return bytes([len(records)]) + body + index + footer


def png(width, height, channels, bit_depth=8):
    color = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    row = bytes(((x * 37 + y * 11) % 256) for x in range(width * channels * bit_depth // 8) for y in [0])
    raw = b"".join(b"\x00" + row for _ in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def bmp(width, height):
    row = bytes(range(width * 3)) + b"\x00" * (-(width * 3) % 4)
    pixels = row * height
    header = b"BM" + struct.pack("<IHHI", 54 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return header + info + pixels


def pgm(width, height):
    return b"P5\n%d %d\n255\n" % (width, height) + bytes(range(width * height))


def args(*words):
    return b"\x00".join(w.encode() for w in words)


def seeds():
    weights = safetensors(MODEL, {"epoch": "2", "model": "cnn", "data": "fashion-mnist"})
    return {
        "json": [b'{"a":[1,-2,true,false,null],"b":{"c":"\\u00e9\\n"}}', b"[]", b'"\\ud83d\\ude00"',
                 b'{"x":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}', b"18446744073709551615"],
        "safetensors": [weights, safetensors(MODEL[:2]), safetensors([("x", "BF16", [2, 2], bytes(8))]),
                        safetensors([("b", "BOOL", [3], b"\x00\x01\x00"), ("e", "F16", [0], b"")])],
        "checkpoint": [b"\x00" + weights, b"\x01" + safetensors(train_state(), {"epoch": "3"}),
                       b"\x02" + safetensors(train_state(), {"epoch": "3"})],
        "idx": [idx_pair(3, 2, 2), idx_pair(2, 3, 2, 3), idx_pair(2, 2, 2, compress=True)],
        "cifar": [cifar(1), cifar(2), cifar100(1), cifar100(3)],
        "cache_record": [sample_record(), sample_record(3, 1),
                         b"S" + tensor_record(F32_CODE, [2], f32(1, 2)) + tensor_record(I64_CODE, [1], i64(7))],
        "cache_file": [cache_file([sample_record(), b"Efailed to load"]), cache_file([sample_record(1, 2)]),
                       cache_file([])],
        "image": [b"\x00" + png(3, 2, 3), b"\x01" + png(2, 2, 4), b"\x02" + png(4, 1, 1, 16), b"\x00" + bmp(2, 2),
                  b"\x00" + pgm(3, 2)],
        "text": [b"\x03hello, world\n", b"\x01caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 ok", b"\x10" + b"ab" * 20],
        "options": [args("--model", "cnn", "--epochs", "2", "--lr=0.01"),
                    args("--data", "cifar10:/tmp/x", "--batch", "64", "--optimizer", "sgd", "--momentum", "0.9"),
                    args("--amp", "bf16", "--cache", "file", "--cache-dir", "/tmp/c", "--workers", "2", "--help")],
        "csv": [b"epoch,loss,accuracy\n1,0.5,0.8\n2,0.25,0.9\n", b'name,note\n"a,b","say ""hi"""\r\n', b"x\n"],
    }


def main():
    out = sys.argv[1]
    for harness, files in seeds().items():
        folder = os.path.join(out, harness, "corpus")
        os.makedirs(folder, exist_ok=True)
        for i, data in enumerate(files):
            with open(os.path.join(folder, "seed-%d" % i), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
