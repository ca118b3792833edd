#!/usr/bin/env python3
"""What machine a benchmark ran on: the CPU's model, its kind (one name per microarchitecture mdl's
results are kept for: its ISA and its measured speeds differ from the others') and the features
the kernels choose by. Figures are compared only within one kind.

    python3 bench/machine.py      prints the kind and the model
"""
import os


def cpuinfo(path="/proc/cpuinfo"):
    """The first processor's fields, as strings (empty when the file cannot be read)."""
    fields = {}
    try:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


# The kinds results are kept for, with what sets each apart.
LABELS = {
    "amd-zen3": "AMD Zen 3 (AVX2, FMA, F16C; no AVX-512)",
    "amd-zen4": "AMD Zen 4 (AVX-512 on a 256-bit datapath, AVX512-BF16)",
    "amd-zen5": "AMD Zen 5 (AVX-512 on a 512-bit datapath, AVX512-BF16, no AMX)",
    "intel-xeon-amx": "Intel Xeon with AMX (Sapphire or Emerald Rapids: AVX-512, AVX512-BF16, AMX)",
    "intel-xeon-icelake": "Intel Xeon, Ice Lake (AVX-512, no BF16 dot products, no AMX)",
    "nvidia-h100": "NVIDIA H100 80GB HBM3 (with the host's CPU rows left out)",
    "nvidia-h200": "NVIDIA H200 (with the host's CPU rows left out)",
}


def known(kind):
    return kind, LABELS[kind]


# (kind, label): by vendor, family and model, then by the features that set the kernels apart.
def kind_of(fields):
    vendor = fields.get("vendor_id", "")
    family = int(fields.get("cpu family", "0") or 0)
    model = int(fields.get("model", "0") or 0)
    flags = set(fields.get("flags", "").split())
    if vendor == "AuthenticAMD":
        if family == 26:
            return known("amd-zen5")
        if family == 25:
            if "avx512f" in flags:
                return known("amd-zen4")
            return known("amd-zen3")
        return f"amd-family{family}", f"AMD family {family} model {model}"
    if vendor == "GenuineIntel":
        if "amx_tile" in flags:
            return known("intel-xeon-amx")
        if family == 6 and model in (106, 108):
            return known("intel-xeon-icelake")
        if "avx512f" in flags:
            return f"intel-avx512-model{model}", f"Intel family {family} model {model} (AVX-512)"
        return f"intel-model{model}", f"Intel family {family} model {model}"
    return "unknown", vendor or "unknown CPU"


def machine():
    """A dict: kind, label, model, cores, and the ISA features that choose mdl's CPU kernels."""
    fields = cpuinfo()
    kind, label = kind_of(fields)
    flags = set(fields.get("flags", "").split())
    features = [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16")
                if f in flags]
    return {"kind": kind, "label": label, "model": fields.get("model name", "?"), "cores": os.cpu_count(),
            "features": features}


def gpu_machine(name):
    """The same dict for a GPU run, from the card's name as nvidia-smi prints it: its kind is the card's
    (nvidia-h100, nvidia-h200, ...), its features empty (the CPU's do not choose a GPU's kernels)."""
    words = name.split()
    model = next((w.lower() for w in words[1:] if any(c.isdigit() for c in w)), "gpu")
    kind = f"{words[0].lower()}-{model}" if words else "gpu"
    return {"kind": kind, "label": LABELS.get(kind, name), "model": name, "cores": os.cpu_count(), "features": []}


if __name__ == "__main__":
    m = machine()
    print(f"{m['kind']}: {m['model']}, {m['cores']} cores ({' '.join(m['features'])})")
