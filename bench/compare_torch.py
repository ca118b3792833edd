#!/usr/bin/python3
"""SimpleCNN on Fashion-MNIST, mdl and PyTorch side by side on this machine.

Both train the same network (conv32-pool-conv64-pool-fc128-fc10, PyTorch's default init
scheme, which mdl's layers follow; with --model cnn-separable the conv64 is depthwise separable,
a 3x3 conv with groups=32 and no bias then a 1x1 conv, as mdl's SeparableCNN) with the same optimizer and hyperparameters on the same
batches in the same order: mdl-train writes its per-epoch sample order (--dump-order) and the
PyTorch loop follows it. Each framework uses every core, PyTorch in its best setting here:
torch.set_num_threads(cores), OPENBLAS_NUM_THREADS=cores (Debian's torch does its GEMM in
OpenBLAS) and OMP_WAIT_POLICY=PASSIVE (so the OpenMP and OpenBLAS pools do not fight), and
OpenBLAS at the core family this CPU belongs to where it fell back to a generic one (unless the
environment sets OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE); its product is checked before use.
mdl-train, which has one OpenMP pool and no OpenBLAS, runs with the wait policy the environment
gave (OpenMP's default when unset): PASSIVE puts its threads to sleep after every parallel region.

    /usr/bin/python3 bench/compare_torch.py [--model cnn] [--epochs 2] [--batch 128] [--subset 0] [--lr 1e-3]
                                            [--amp none|bf16]

Needs `make tools` (build/latest/mdl-train) and Debian's python3-torch. Prints, per epoch, each
framework's step time, samples/s and test accuracy, and the ratio; then the trained models' inference
speed over the 10,000 test images (mdl-train --evaluate against torch.no_grad()).
"""
import argparse, csv, gzip, os, subprocess, sys, tempfile, time

from thread_env import mdl_env, torch_env  # bench/thread_env.py, beside this script

CORES = os.cpu_count() or 1


def cpu_flags_and_model():
    """(flags, "model name (family F model M), ISA") of the first CPU in /proc/cpuinfo."""
    fields = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if not key.strip():
                break
            fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    isa = ("AVX-512" + (" + AMX" if "amx_bf16" in flags else "") if "avx512f" in flags
           else "AVX2" if "avx2" in flags else "SSE")
    model = (f"{fields.get('model name', 'unknown CPU')} (family {fields.get('cpu family', '?')} "
             f"model {fields.get('model', '?')}), {isa}")
    return flags, model


def openblas_core_for_this_cpu():
    """(core OpenBLAS chose, the family to set instead or None). Debian's OpenBLAS 0.3.21 falls back
    to its generic Prescott core on CPUs newer than it (Sapphire/Emerald Rapids, Zen 4), which
    slows PyTorch's Linear layers (Debian's torch does its GEMM in OpenBLAS)."""
    import ctypes
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
    except OSError:
        return None, None
    lib.openblas_get_corename.restype = ctypes.c_char_p
    chosen = lib.openblas_get_corename().decode()
    flags, _ = cpu_flags_and_model()
    if "avx512f" in flags:
        return chosen, None if chosen in ("SkylakeX", "Cooperlake", "SapphireRapids") else "SkylakeX"
    if "avx2" in flags and "fma" in flags:
        return chosen, None if chosen in ("Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids") else "Haswell"
    return chosen, None


if os.environ.get("MDL_COMPARE_ENV") != "1":  # set the thread environment (and OpenBLAS core) before torch loads
    env = torch_env(CORES)
    if "OPENBLAS_CORETYPE" not in os.environ and "OPENBLAS_L2_SIZE" not in os.environ:
        chosen, better = openblas_core_for_this_cpu()
        if better:
            env.update(OPENBLAS_CORETYPE=better, MDL_OPENBLAS_CORE_WAS=chosen)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import numpy as np
import torch

ROOT = "/usr/share/datasets/fashion-mnist"
HERE = os.path.dirname(os.path.abspath(__file__))
# build/latest/mdl-train (the folder `make tools` built last), or MDL_TRAIN=path.
MDL_TRAIN = os.environ.get("MDL_TRAIN") or os.path.join(HERE, "..", "build", "latest", "mdl-train")


def read_idx(name):
    with gzip.open(os.path.join(ROOT, name)) as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def simple_cnn(separable=False):
    n = torch.nn
    conv2 = (n.Sequential(n.Conv2d(32, 32, 3, padding=1, groups=32, bias=False), n.Conv2d(32, 64, 1)) if separable
             else n.Conv2d(32, 64, 3, padding=1))
    return n.Sequential(
        n.Sequential(n.Conv2d(1, 32, 3, padding=1), n.ReLU(), n.MaxPool2d(2), conv2, n.ReLU(), n.MaxPool2d(2)),
        n.Sequential(n.Flatten(), n.Linear(64 * 7 * 7, 128), n.ReLU(), n.Linear(128, 10)))


def run_mdl(args, workdir):
    log, order = os.path.join(workdir, "mdl.csv"), os.path.join(workdir, "order.bin")
    weights = os.path.join(workdir, "mdl.safetensors")
    cmd = [MDL_TRAIN, "--model", args.model, "--epochs", str(args.epochs), "--batch", str(args.batch),
           "--optimizer", "adamw", "--lr", str(args.lr), "--weight-decay", "0", "--seed", str(args.seed),
           "--log", log, "--dump-order", order, "--save", weights, "--no-progress"]
    if args.subset:
        cmd += ["--subset", str(args.subset)]
    if args.amp != "none":
        cmd += ["--amp", args.amp]
    print("mdl:", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=mdl_env()).stdout
    kernel = [line.split("CPU GEMM micro-kernel ")[1] for line in out.splitlines() if "CPU GEMM micro-kernel " in line]
    print("mdl: CPU GEMM micro-kernel", kernel[0] if kernel else "(not reported)", flush=True)
    with open(log) as f:
        rows = list(csv.DictReader(f))
    n = args.subset or 60000
    orders = np.fromfile(order, dtype="<i8").reshape(args.epochs, n)
    # Inference: the trained weights over the 10,000 test images, batches of 256, no gradients.
    evaluate = [MDL_TRAIN, "--model", args.model, "--evaluate", weights, "--no-progress"]
    if args.amp != "none":
        evaluate += ["--amp", args.amp]
    out = subprocess.run(evaluate, check=True, stdout=subprocess.PIPE, text=True, env=mdl_env()).stdout
    speed = [float(line.split(", ")[-1].split()[0]) for line in out.splitlines() if line.startswith("evaluated ")]
    return rows, orders, speed[0] if speed else float("nan")


def autocast(args):
    """torch.autocast on the CPU in bf16 for --amp bf16, else a context that does nothing."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp == "bf16")


def run_torch(args, orders):
    torch.set_num_threads(CORES)
    torch.manual_seed(args.seed)
    mean, std = 0.2860, 0.3530
    x = (torch.from_numpy(read_idx("train-images-idx3-ubyte.gz").copy()).float() / 255 - mean) / std
    y = torch.from_numpy(read_idx("train-labels-idx1-ubyte.gz").astype(np.int64))
    xt = (torch.from_numpy(read_idx("t10k-images-idx3-ubyte.gz").copy()).float() / 255 - mean) / std
    yt = torch.from_numpy(read_idx("t10k-labels-idx1-ubyte.gz").astype(np.int64))
    x, xt = x.unsqueeze(1), xt.unsqueeze(1)
    model = simple_cnn(separable=args.model == "cnn-separable")
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    loss_fn = torch.nn.CrossEntropyLoss()
    results = []
    for epoch, order in enumerate(orders):
        model.train()
        idx = torch.from_numpy(order.copy())
        steps = (len(idx) + args.batch - 1) // args.batch
        t0 = time.perf_counter()
        for s in range(steps):
            b = idx[s * args.batch:(s + 1) * args.batch]
            opt.zero_grad(set_to_none=True)
            with autocast(args):
                loss = loss_fn(model(x[b]), y[b])
            loss.backward()
            opt.step()
        seconds = time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            with autocast(args):
                correct = sum((model(xt[i:i + 1000]).argmax(1) == yt[i:i + 1000]).sum().item()
                              for i in range(0, len(xt), 1000))
        results.append({"seconds": seconds, "steps": steps, "samples_per_second": len(idx) / seconds,
                        "val_accuracy": correct / len(xt)})
    # Inference as mdl-train --evaluate runs it: the 10,000 test images in batches of 256, no gradients.
    model.eval()
    with torch.no_grad():
        t0 = time.perf_counter()
        for i in range(0, len(xt), 256):
            with autocast(args):
                loss_fn(model(xt[i:i + 256]), yt[i:i + 256])
        inference = len(xt) / (time.perf_counter() - t0)
    return results, inference


def openblas_line():
    """Which core OpenBLAS runs and why, and whether torch's f32 products on it are right."""
    chosen, _ = openblas_core_for_this_cpu()
    if chosen is None:
        where = "OpenBLAS not found"
    elif os.environ.get("MDL_OPENBLAS_CORE_WAS"):
        where = (f"OpenBLAS core {chosen} (OPENBLAS_CORETYPE set for this run; on its own it chose "
                 f"{os.environ['MDL_OPENBLAS_CORE_WAS']} on this CPU)")
    elif "OPENBLAS_CORETYPE" in os.environ or "OPENBLAS_L2_SIZE" in os.environ:
        where = f"OpenBLAS core {chosen} (as the environment set it)"
    else:
        where = f"OpenBLAS core {chosen} (its own choice)"
    g = torch.Generator().manual_seed(3)
    a, b = torch.rand(193, 517, generator=g) - 0.5, torch.rand(517, 211, generator=g) - 0.5
    exact = a.double() @ b.double()
    err = ((a @ b).double() - exact).abs().max().item() / exact.abs().max().item()
    verdict = "" if err <= 1e-4 else ": WRONG RESULTS, the PyTorch column is no yardstick on this machine"
    return f"{where}; torch's f32 matmul differs from f64 by {err:.1e} of the largest entry{verdict}"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["cnn", "cnn-separable"], default="cnn")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--subset", type=int, default=0)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--amp", choices=["none", "bf16"], default="none",
                   help="autocast bf16 on both sides (mdl-train --amp bf16, torch.autocast('cpu', bfloat16))")
    args = p.parse_args()
    if not os.path.exists(MDL_TRAIN):
        sys.exit("compare_torch.py: build/latest/mdl-train is missing; run `make tools` first")
    print(f"torch {torch.__version__}, {CORES} cores, threads {torch.get_num_threads()}, "
          f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}; "
          f"mdl-train: OMP_WAIT_POLICY={mdl_env().get('OMP_WAIT_POLICY', '(unset)')}")
    print(f"CPU: {cpu_flags_and_model()[1]}; {openblas_line()}")
    with tempfile.TemporaryDirectory() as work:
        mdl_rows, orders, mdl_inference = run_mdl(args, work)
    torch_rows, torch_inference = run_torch(args, orders)
    steps = torch_rows[0]["steps"]
    name = "SeparableCNN" if args.model == "cnn-separable" else "SimpleCNN"
    print(f"\n{name}, Fashion-MNIST, batch {args.batch}, {steps} steps per epoch, AdamW lr {args.lr}, "
          f"{'f32' if args.amp == 'none' else 'autocast ' + args.amp}")
    print(f"{'epoch':>5} | {'mdl ms/step':>11} {'torch ms/step':>13} {'torch/mdl':>9} | "
          f"{'mdl samples/s':>13} {'torch samples/s':>15} | {'mdl acc':>7} {'torch acc':>9}")
    for e, (m, t) in enumerate(zip(mdl_rows, torch_rows), 1):
        m_ms, t_ms = 1000 * float(m["seconds"]) / steps, 1000 * t["seconds"] / steps
        print(f"{e:>5} | {m_ms:>11.2f} {t_ms:>13.2f} {t_ms / m_ms:>9.2f} | {float(m['samples_per_second']):>13.0f} "
              f"{t['samples_per_second']:>15.0f} | {100 * float(m['val_accuracy']):>6.2f}% {100 * t['val_accuracy']:>8.2f}%")

    print(f"inference, 10,000 test images in batches of 256: mdl {mdl_inference:.0f} images/s, torch "
          f"{torch_inference:.0f} images/s, mdl/torch {mdl_inference / torch_inference:.2f}x")


if __name__ == "__main__":
    main()
