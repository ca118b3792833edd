#!/usr/bin/env python3
"""The layer check: every #include "..." in the library must point to its own layer or a lower one.

The layers, lowest first, one folder each. A subfolder belongs to the nearest listed folder above
it (nn/models is nn), so a listed subfolder is a layer of its own (ops/native sits below autograd,
ops above it). The one line with two folders is INDEPENDENT: the two backends share a rank but must
not include each other.
The rest of tools/, bench/ and tests/ sit above everything and are not checked.
Usage: tools/check_layers.py [ROOT]   exit 0 when clean, 1 with one line per upward include.
"""
import os
import re
import sys

LAYERS = [
    "switches/list",     # every switch declared once (switches.def) and the toggles' flags it generates
    "tensor",            # Tensor, Storage, DType, Device, allocators' interface, grad and autocast mode, profiler hooks
    "io",                # JSON and safetensors
    "profiler",          # sessions, tables, traces
    "kernels",           # the kernel contracts and the math both backends share
    "cpu cuda",          # the CPU backend; the CUDA backend (cuda/runtime and its kernels)
    "ops/native",               # the no-autograd ops (checks, promotion, allocation, the kernel call) and the factories
    "autograd",          # graph nodes, record_fn, the registry of differentiable ops, the backward engine
    "ops",               # the public ops with their backward, the autocast policy, gradcheck
    "nn",                # modules, functional layers, models
    "optim",             # optimizers, schedules, clipping
    "amp",               # GradScaler and keep_f32, above nn and optim
    "data",              # datasets, transforms, the loader and its cache
    "dist",              # process groups and DistributedDataParallel
    "switches",          # every optimization switch: name, default, setter, benchmark pair
    "train",             # the training loop (Trainer), its step, callbacks, checkpoints and metrics
    "tools/mdl_train",   # mdl-train's own parts: options, setup from them, plots, run_training
]
INDEPENDENT = [("cpu", "cuda")]
SOURCE = re.compile(r"\.(cpp|h|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def rank_table():
    return {folder: rank for rank, line in enumerate(LAYERS) for folder in line.split()}


def folder_of(path, ranks):
    """The listed folder a path belongs to, or None (top-level files, tools, bench, tests)."""
    parts = path.split("/")[:-1]
    while parts:
        name = "/".join(parts)
        if name in ranks:
            return name
        parts.pop()
    return None


def shared_ranks():
    """Layers naming more than one folder, other than an INDEPENDENT group: each folder needs its own rank."""
    independent = {frozenset(p) for p in INDEPENDENT}
    return [line for line in LAYERS if len(line.split()) > 1 and frozenset(line.split()) not in independent]


def violations(root):
    ranks = rank_table()
    independent = {frozenset(p) for p in INDEPENDENT}
    found = []
    for folder in ranks:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for f in sorted(files):
                if not SOURCE.search(f):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), root)
                src = folder_of(path, ranks)
                if src != folder:
                    continue  # a listed subfolder's file: checked when its own folder is walked
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as fh:
                    for lineno, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        dst = folder_of(m.group(1), ranks)
                        if dst is None or dst == src:
                            continue
                        if ranks[dst] > ranks[src]:
                            found.append(f"{path}:{lineno}: includes {m.group(1)}, but {dst}/ is above {src}/")
                        elif frozenset((src, dst)) in independent:
                            found.append(f"{path}:{lineno}: includes {m.group(1)}, but {src}/ and {dst}/ are independent")
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = [f"layer table: '{line}' share a rank; give each its own" for line in shared_ranks()]
    found += violations(root)
    for v in found:
        print(v)
    if found:
        print(f"layer check: {len(found)} include(s) break the layer order (tools/check_layers.py)")
        return 1
    print(f"layer check: clean ({len(rank_table())} folders in {len(LAYERS)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
