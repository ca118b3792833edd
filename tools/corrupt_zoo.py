#!/usr/bin/env python3
"""Writes the corrupt-file zoo: for each format mdl reads, files that must each be refused with an
mdl::Error naming the file (tests/data/test_corrupt_zoo.cpp loads every one). Usage:
    corrupt_zoo.py OUTDIR
OUTDIR gets one folder per format and manifest.tsv: one line per case, "kind<TAB>path<TAB>what",
the path relative to OUTDIR. Valid companions (a labels file for broken images, ...) are in
OUTDIR/valid and are not cases."""
import gzip
import json
import os
import struct
import sys
import zlib

out = sys.argv[1]
cases = []


def write(kind, name, data, what):
    path = os.path.join(out, kind, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    cases.append((kind, os.path.relpath(path, out), what))


def valid(name, data):
    path = os.path.join(out, "valid", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def common(kind, ext, good):
    """Empty, one byte, all zeros, all 0xFF, and every cut of a valid file's header."""
    write(kind, "empty" + ext, b"", "empty file")
    write(kind, "one_byte" + ext, good[:1], "1-byte file")
    write(kind, "zeros" + ext, bytes(len(good)), "all-zero file")
    write(kind, "ones" + ext, b"\xff" * len(good), "all-0xFF file")
    for cut in range(1, min(len(good), 64)):
        write(kind, "cut_%03d%s" % (cut, ext), good[:cut], "cut at byte %d" % cut)


# IDX: big-endian magic 0 0 8 ndim, dims, unsigned bytes.
def idx(dims, payload=b""):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


good_images = idx([2, 3, 3], bytes(range(18)))
valid("labels.idx", idx([2], b"\x01\x02"))
valid("images.idx", good_images)
common("idx-images", ".idx", good_images)
for name, dims in {"wrap_to_zero": [1, 131072, 131072, 1 << 30 & 0xffffffff or 1],
                   "wrap_128": [2, 5139, 11184832, 160465489],
                   "claims_2_31": [1 << 31 & 0xffffffff, 1, 1], "claims_2_32_1": [0xffffffff, 1, 1],
                   "claims_2_62": [0xffffffff, 0xffffffff, 0x3fffffff], "claims_2_64_1": [0xffffffff] * 3}.items():
    write("idx-images", name + ".idx", idx(dims, bytes(128)), "dims " + str(dims))
write("idx-images", "five_dims.idx", bytes([0, 0, 8, 5]) + bytes(20), "5 dimensions")
write("idx-images", "int_dtype.idx", bytes([0, 0, 0x0c, 3]) + struct.pack(">III", 2, 3, 3) + bytes(72), "foreign dtype")
write("idx-images", "count_mismatch.idx", idx([3, 3, 3], bytes(27)), "3 images for 2 labels")
write("idx-images", "trailing.idx", good_images + b"x", "a trailing byte")
write("idx-images", "gzip_cut.idx.gz", gzip.compress(good_images)[:-9], "gzip stream cut")
write("idx-images", "gzip_corrupt.idx.gz", gzip.compress(good_images)[:12] + b"\xff" * 20, "corrupt deflate data")
write("idx-images", "gzip_bomb.idx.gz", gzip.compress(idx([1, 8, 8]) + bytes(64 << 20), 9),
      "64 MiB of zeros after a header declaring 64 bytes")
write("idx-labels", "labels_2d.idx", idx([2, 1], b"\x01\x02"), "labels with 2 dimensions")

# CIFAR-10 binary: a folder with test_batch.bin of 3073-byte records (label, then 3072 pixels).
record = b"\x03" + bytes(3072)
for name, data, what in [("empty", b"", "empty file"), ("short", record[:3072], "one record cut short"),
                         ("extra", record + b"\x01", "a record and a byte"), ("label", b"\x0a" + bytes(3072), "label 10"),
                         ("ones", b"\xff" * 3073, "all-0xFF record")]:
    write("cifar", name + "/test_batch.bin", data, what)

# safetensors: u64 header length, JSON header, data.
def st(header, data=b"", length=None):
    h = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", len(h) if length is None else length) + h + data


good_st = st({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, bytes(8))
common("safetensors", ".safetensors", good_st)
for name, length in {"len_2_31": 1 << 31, "len_2_32_1": (1 << 32) - 1, "len_2_62": 1 << 62, "len_2_63": 1 << 63,
                     "len_2_64_1": (1 << 64) - 1}.items():
    write("safetensors", name + ".safetensors", st({"w": {}}, b"", length), "header length " + str(length))
for name, shape in {"shape_2_31": [1 << 31], "shape_2_62": [1 << 31, 1 << 31], "shape_2_63": [1 << 62, 2],
                    "shape_2_64_1": [(1 << 32) - 1, (1 << 32) + 1], "shape_wrap": [1 << 32, 1 << 32],
                    "shape_negative": [-1, 2]}.items():
    write("safetensors", name + ".safetensors", st({"w": {"dtype": "U8", "shape": shape, "data_offsets": [0, 8]}},
                                                   bytes(8)), "shape " + str(shape))
write("safetensors", "duplicate.safetensors",
      st(b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
         bytes(8)), "duplicate names")
write("safetensors", "foreign_dtype.safetensors", st({"w": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}},
                                                      bytes(8)), "dtype C64")
write("safetensors", "offsets_wrap.safetensors",
      st({"w": {"dtype": "U8", "shape": [8], "data_offsets": [(1 << 64) - 4, 4]}}, bytes(8)), "offsets that wrap")
write("safetensors", "offsets_past_end.safetensors",
      st({"w": {"dtype": "U8", "shape": [16], "data_offsets": [0, 16]}}, bytes(8)), "data past the end")
write("safetensors", "overlap.safetensors",
      st({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
          "b": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}}, bytes(8)), "overlapping tensors")
write("safetensors", "deep.safetensors", st(b'{"__metadata__":' + b"[" * 100000 + b"]" * 100000 + b"}"),
      "100,000 nested arrays")
write("safetensors", "nan_number.safetensors", st(b'{"w":{"dtype":"U8","shape":[NaN],"data_offsets":[0,1]}}', b"\0"),
      "NaN in a shape")
write("safetensors", "huge_number.safetensors",
      st(b'{"w":{"dtype":"U8","shape":[1e300],"data_offsets":[0,1]}}', b"\0"), "1e300 in a shape")
write("safetensors", "bad_utf8.safetensors", st(b'{"w\xff":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0"),
      "a name that is not UTF-8")

# Images: ImageFolder's formats, read one file at a time.
def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(w, h, idat):
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b""))


good_png = png(2, 2, zlib.compress(bytes(2 * (1 + 2 * 3))))
common("image", ".png", good_png)
write("image", "declares_16k.png", png(16384, 16384, zlib.compress(bytes(16384 * 3 + 1))),
      "a 16k x 16k PNG with one row of data")
write("image", "declares_2_31.png", png(1 << 31, 1, zlib.compress(bytes(8))), "a PNG 2^31 pixels wide")
write("image", "declares_0.png", png(0, 4, zlib.compress(bytes(8))), "a PNG 0 pixels wide")
write("image", "bad_idat.png", png(2, 2, b"\x78\x9c\xff\xff\xff\xff"), "corrupt image data")
tga = bytes([0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2, 0, 24, 0]) + bytes(12)
write("image", "tga_named.png", tga, "TGA content named .png")
bmp_pixels = bytes(16)
bmp = (b"BM" + struct.pack("<IHHI", 14 + 40 + len(bmp_pixels), 0, 0, 54) +
       struct.pack("<IiiHHIIiiII", 40, 2, 2, 1, 24, 0, len(bmp_pixels), 0, 0, 0, 0) + bmp_pixels)
write("image", "bmp_named.png", bmp, "BMP content named .png")
write("image", "bmp_huge.bmp", b"BM" + struct.pack("<IHHI", 54, 0, 0, 54) +
      struct.pack("<IiiHHIIiiII", 40, 1 << 30, 1 << 30, 1, 24, 0, 0, 0, 0, 0, 0), "a BMP declaring 2^30 x 2^30")
# Cut inside the pixel data, which stb decodes past the end of (as zeros, or memory it never wrote).
ppm_header, pgm_header = b"P6\n4 4\n255\n", b"P5\n4 4\n255\n"
bmp_4x4 = (b"BM" + struct.pack("<IHHI", 54 + 48, 0, 0, 54) +
           struct.pack("<IiiHHIIiiII", 40, 4, 4, 1, 24, 0, 48, 0, 0, 0, 0) + bytes(range(48)))
gif_1x1 = bytes([0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 1, 0, 1, 0, 0x80, 0, 0, 0x10, 0x20, 0x30, 0xf0, 0xe0, 0xd0,
                 0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 1, 0, 0x3b])
for ext, good, data_at in [(".ppm", ppm_header + bytes(range(48)), len(ppm_header)),
                           (".pgm", pgm_header + bytes(range(16)), len(pgm_header)),
                           (".bmp", bmp_4x4, 54), (".gif", gif_1x1, 29)]:
    for cut in sorted({data_at, data_at + 1, (data_at + len(good)) // 2, len(good) - 1 - (ext == ".gif")}):
        write("image", "pixels_cut_%03d%s" % (cut, ext), good[:cut], "cut at byte %d of %d" % (cut, len(good)))
write("image", "maxval_0.pgm", b"P5\n1 1\n0\n\0", "PNM maxval 0")
write("image", "zero_high.ppm", b"P6\n4 0\n255\n", "a PPM 0 pixels high")
write("image", "psd.psd", b"8BPS\x00\x01" + bytes(20), "a PSD file")

# Text: UTF-8 characters into context windows (context 8 in the test).
write("text", "empty.txt", b"", "empty file")
write("text", "short.txt", b"abc", "shorter than the context")
write("text", "bad_utf8.txt", b"hello \xff\xfe world, long enough", "invalid UTF-8")
write("text", "cut_utf8.txt", b"hello world, long enough \xe2\x82", "a character cut at the end")
write("text", "overlong.txt", b"hello world, \xc0\xaf long enough", "an overlong encoding")

with open(os.path.join(out, "manifest.tsv"), "w") as f:
    for kind, path, what in cases:
        f.write("%s\t%s\t%s\n" % (kind, path, what))
print("%d cases in %s" % (len(cases), out))
