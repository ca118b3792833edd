#!/usr/bin/python3
"""mdl's optimization study again in PyTorch, on the same batches in the same order, beside mdl's figures.

tools/mdl-study.cpp trains models on Fashion-MNIST with one optimization after another and reports
s/epoch, the speedup over the f32 baseline and the time to a target validation accuracy. This script
trains the same models (SimpleCNN as nn/models/simple.cpp; ResNet-18 as nn/models/resnet.cpp: a 3x3
stride-1 stem with 1 input channel, no max pool, stages 64/128/256/512, adaptive average pool, fc)
with the same optimizer (AdamW, no weight decay), batch and learning rate, following the per-epoch
sample orders mdl dumped (DIR/fashion-mnist_<model>_seed<N>.order, raw native-endian int64, epochs x
samples, as mdl-train --dump-order writes them), for these rows:
    baseline        f32 (on a GPU: TF32 off, as mdl's f32; cudnn.benchmark on)
    +amp            torch.autocast f16 with a GradScaler (GPU only: skipped, with a note, on the CPU)
    +amp-bf16       torch.autocast bf16, no scaler
    +channels-last  f32, the model and every batch in torch.channels_last
    +amp+channels-last  +amp and +channels-last together (GPU only, as +amp)
The training images stay on the host, normalised (mean 0.2860, std 0.3530); each batch is indexed
there and copied to the device, as mdl's baseline copies each batch from host memory. An epoch's
time is its training part only (synchronised on a GPU); validation is the 10,000 test images in
batches of 1000 under the training row's autocast. Runs go seed by seed (seed 0 of every model and
row, then seed 1, ...), so a --deadline leaves fewer seeds everywhere rather than whole models out.

    /usr/bin/python3 bench/torch_study.py --orders DIR [--data DIR] [--models cnn,resnet18]
        [--rows baseline,+amp,+amp-bf16,+channels-last,+amp+channels-last] [--seeds 3] [--epochs 8] [--subset 20000]
        [--batch 128] [--lr 1e-3] [--device cuda|cpu] [--threads N] [--target 85[,model=N]]
        [--stop-at-target] [--deadline S] [--val-samples 10000] [--out CSV] [--mdl-summary CSV]
        [--report MD]

Needs PyTorch (a GPU build for the rows as they are meant; Debian's CPU-only python3-torch runs the
CPU rows) and numpy, and Fashion-MNIST's four IDX .gz files. Prints a line per epoch; --out writes
them as CSV (model,config,seed,epoch,seconds,val_accuracy,peak_mib; peak_mib: on a GPU, the most
memory the run's training steps allocated so far, validation left out; empty on the CPU). The
markdown section (a table per model: PyTorch's s/epoch, speedup and time to target beside mdl's
s/epoch and speedup from mdl-study's summary CSV) is printed and, with --report, appended to that
file. Exit status: 0 when it ran what it could, 1 when a run raised an exception (the other runs
still run and are reported), 2 on bad arguments.
"""
import argparse, contextlib, csv, gc, gzip, os, statistics, sys, time, traceback

START = time.monotonic()

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_models import ResNet18, simple_cnn  # noqa: E402 (bench/torch_models.py, beside this script)

ROWS = ["baseline", "+amp", "+amp-bf16", "+channels-last", "+amp+channels-last"]
F16_ROWS = ("+amp", "+amp+channels-last")  # autocast f16 with a GradScaler
MODELS = ["cnn", "resnet18"]
FILES = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
         "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
MEAN, STD = 0.2860, 0.3530
CSV_COLUMNS = ["model", "config", "seed", "epoch", "seconds", "val_accuracy", "peak_mib"]


def read_idx(root, name):
    with gzip.open(os.path.join(root, name)) as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)




BUILD = {"cnn": simple_cnn, "resnet18": lambda: ResNet18(10, 1)}


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return "unknown CPU"


def parse_target(text, models):
    """'90' or '90,resnet18=85' -> (default, {model: percent}); ValueError on a bad one."""
    default, per_model = None, {}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, eq, value = item.rpartition("=")
        percent = float(value)
        if not 0 < percent <= 100:
            raise ValueError(f"{value} is not a percentage in (0, 100]")
        if eq:
            if not name:
                raise ValueError(f"'{item}' names no model")
            per_model[name.strip()] = percent
        else:
            default = percent
    missing = [m for m in models if m not in per_model and default is None]
    if missing:
        raise ValueError(f"no target for {', '.join(missing)} (give a bare number as the default)")
    return default, per_model


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                   help="folder with Fashion-MNIST's four IDX .gz files")
    p.add_argument("--orders", required=True,
                   help="mdl's dumped sample orders: DIR/fashion-mnist_<model>_seed<N>.order")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    p.add_argument("--seeds", type=int, default=3, help="runs per row: seeds 0 .. N-1")
    p.add_argument("--epochs", type=int, default=8, help="the most epochs a run trains")
    p.add_argument("--subset", type=int, default=20000, help="the first N training samples (0: all 60000)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads (torch.set_num_threads)")
    p.add_argument("--target", default="85",
                   help="validation accuracy in %%: '90' for every model, '90,resnet18=85' to override one")
    p.add_argument("--stop-at-target", action="store_true",
                   help="a run stops after the first epoch whose validation accuracy reached its model's target")
    p.add_argument("--deadline", type=float, default=None,
                   help="seconds from the start after which no further run starts")
    p.add_argument("--val-samples", type=int, default=10000,
                   help="validate on the first N of the 10,000 test images (fewer only for quick tests)")
    p.add_argument("--out", help="per-epoch CSV: " + ",".join(CSV_COLUMNS))
    p.add_argument("--mdl-summary", help="mdl-study's summary CSV, for mdl's columns")
    p.add_argument("--report", help="append the markdown section to this file")
    args = p.parse_args()

    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    for kind, given, known in (("--models", args.models, MODELS), ("--rows", args.rows, ROWS)):
        unknown = [x for x in given if x not in known]
        if unknown or not given:
            p.error(f"{kind}: {', '.join(unknown) or 'empty'}; choose from {', '.join(known)}")
        if len(set(given)) != len(given):
            p.error(f"{kind} names one twice")
    for name in ("seeds", "epochs", "batch", "threads", "val_samples"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.val_samples > 10000:
        p.error("--val-samples is at most 10000")
    if not 0 <= args.subset <= 60000:
        p.error("--subset is 0 (all) or 1 .. 60000")
    if not args.lr > 0:
        p.error("--lr must be positive")
    if args.deadline is not None and args.deadline < 0:
        p.error("--deadline must not be negative")
    try:
        args.target_default, args.target_per_model = parse_target(args.target, args.models)
    except ValueError as e:
        p.error(f"--target {args.target!r}: {e}")
    try:
        args.dev = torch.device(args.device)
    except RuntimeError as e:
        p.error(f"--device {args.device!r}: {e}")
    if args.dev.type not in ("cpu", "cuda"):
        p.error("--device is cpu or cuda[:N]")
    if args.dev.type == "cuda":
        if not torch.cuda.is_available():
            p.error("--device cuda: PyTorch sees no GPU here")
        if args.dev.index is None:
            args.dev = torch.device("cuda", torch.cuda.current_device())
        if args.dev.index >= torch.cuda.device_count():
            p.error(f"--device {args.device}: {torch.cuda.device_count()} GPUs here")
    missing = [f for f in FILES if not os.path.isfile(os.path.join(args.data, f))]
    if missing:
        p.error(f"--data {args.data}: missing {', '.join(missing)}")
    return args


def target_for(args, model):
    return args.target_per_model.get(model, args.target_default)


def load_order(args, model, seed, n):
    """(orders (epochs, n) int64, None) or (None, why not)."""
    path = os.path.join(args.orders, f"fashion-mnist_{model}_seed{seed}.order")
    if not os.path.isfile(path):
        return None, f"no order file {path}"
    size = os.path.getsize(path)
    if size == 0 or size % (8 * n):
        return None, f"order file {path} holds {size} bytes, not a whole number of epochs of {n} int64 (--subset?)"
    epochs = min(size // (8 * n), args.epochs)
    orders = np.fromfile(path, dtype=np.int64, count=epochs * n).reshape(epochs, n)
    if orders.min() < 0 or orders.max() >= n:
        return None, f"order file {path} indexes outside the first {n} training samples"
    return orders, None


def autocast(row, device_type):
    if row in F16_ROWS:
        return torch.autocast(device_type, dtype=torch.float16)
    if row == "+amp-bf16":
        return torch.autocast(device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def grad_scaler():
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def train_run(args, model_name, row, seed, orders, data, csv_writer, csv_file):
    """One run; a list of (seconds, correct, total) per epoch."""
    x, y, xt, yt = data
    dev, cuda = args.dev, args.dev.type == "cuda"
    channels_last = row in ("+channels-last", "+amp+channels-last")
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    torch.manual_seed(seed)
    model = BUILD[model_name]().to(dev)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    loss_fn = nn.CrossEntropyLoss()
    scaler = grad_scaler() if row in F16_ROWS else None
    target = target_for(args, model_name)
    epochs, peak = [], 0.0
    for epoch, order in enumerate(orders, 1):
        model.train()
        idx = torch.from_numpy(order.copy())
        steps = (len(idx) + args.batch - 1) // args.batch
        sync(dev)
        t0 = time.perf_counter()
        for s in range(steps):
            b = idx[s * args.batch:(s + 1) * args.batch]
            xb = x[b].to(dev, memory_format=fmt)
            yb = y[b].to(dev)
            opt.zero_grad(set_to_none=True)
            with autocast(row, dev.type):
                loss = loss_fn(model(xb), yb)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
        sync(dev)
        seconds = time.perf_counter() - t0
        if cuda:  # the training part's peak; validation's batches of 1000 are left out
            peak = max(peak, torch.cuda.max_memory_allocated(dev) / 2 ** 20)
        model.eval()
        correct = 0
        with torch.no_grad(), autocast(row, dev.type):
            for i in range(0, len(xt), 1000):
                xb = xt[i:i + 1000].to(dev, memory_format=fmt)
                correct += (model(xb).argmax(1) == yt[i:i + 1000].to(dev)).sum().item()
        if cuda:
            torch.cuda.reset_peak_memory_stats(dev)
        epochs.append((seconds, correct, len(xt)))
        accuracy = correct / len(xt)
        print(f"{model_name} {row} seed {seed} epoch {epoch}/{len(orders)}: {seconds:.3f} s, "
              f"val acc {100 * accuracy:.2f}%" + (f", peak {peak:.0f} MiB" if cuda else ""), flush=True)
        if csv_writer is not None:
            csv_writer.writerow([model_name, row, seed, epoch, f"{seconds:.6f}", f"{accuracy:.4f}",
                                 f"{peak:.1f}" if cuda else ""])
            csv_file.flush()
        if args.stop_at_target and correct * 100 >= target * len(xt):
            break
    del model, opt
    return epochs


# ---- the report ----

def num(text):
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if v == v else None  # NaN as missing


def read_mdl_summary(path, device_kind):
    """{(model, config): row} from mdl-study's summary, fashion-mnist on this device kind; and a note."""
    if not path:
        return {}, "no --mdl-summary given: mdl's columns are empty"
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            fields = reader.fieldnames or []
    except OSError as e:
        return {}, f"mdl summary {path} could not be read ({e.strerror}): mdl's columns are empty"
    except csv.Error as e:
        return {}, f"mdl summary {path} is not CSV ({e}): mdl's columns are empty"
    need = ["device", "data", "model", "config"]
    if not rows or any(c not in fields for c in need):
        what = "is empty" if not rows else "lacks the columns " + ", ".join(c for c in need if c not in fields)
        return {}, f"mdl summary {path} {what}: mdl's columns are empty"
    out = {}
    for r in rows:
        dev = (r.get("device") or "").strip()
        if (r.get("data") or "").strip() == "fashion-mnist" and dev.split(":")[0] == device_kind:
            out[((r.get("model") or "").strip(), (r.get("config") or "").strip())] = r
    note = None if out else f"mdl summary {path} has no fashion-mnist rows for device {device_kind}"
    return out, note


def spread(values, f, suffix=""):
    """The median of values and, over more than one, (min-max)."""
    if not values:
        return "-"
    text = f"{statistics.median(values):{f}}{suffix}"
    if len(values) > 1:
        text += f" ({min(values):{f}}{suffix}-{max(values):{f}}{suffix})"
    return text


def given(value, lo, hi, f, suffix=""):
    """A figure from mdl's summary with its (min-max) when both are there and differ."""
    if value is None:
        return "-"
    text = f"{value:{f}}{suffix}"
    if lo is not None and hi is not None and f"{lo:{f}}" != f"{hi:{f}}":
        text += f" ({lo:{f}}{suffix}-{hi:{f}}{suffix})"
    return text


def direction(torch_speedups, mdl_row):
    if not torch_speedups or mdl_row is None or num(mdl_row.get("speedup")) is None:
        return "-"
    t, m = statistics.median(torch_speedups), num(mdl_row.get("speedup"))
    if t > 1 and m > 1:
        text = "yes, both faster"
    elif t < 1 and m < 1:
        text = "yes, both slower"
    elif m > 1:
        text = "no: mdl faster, PyTorch not"
    elif t > 1:
        text = "no: PyTorch faster, mdl not"
    else:
        text = "yes, neither faster"
    m_lo, m_hi = num(mdl_row.get("speedup_min")), num(mdl_row.get("speedup_max"))
    noisy = (len(torch_speedups) > 1 and min(torch_speedups) <= 1 <= max(torch_speedups)) or \
            (m_lo is not None and m_hi is not None and m_lo <= 1 <= m_hi)
    return text + (" (within noise)" if noisy else "")


def model_table(args, model, results, mdl):
    """The markdown table of one model; None when none of its rows ran."""
    rows = [r for r in sorted(args.rows, key=lambda r: r != "baseline") if results.get((model, r))]
    if not rows:
        return None
    target = target_for(args, model)
    base = results.get((model, "baseline"), {})
    lines = ["| row | PyTorch s/epoch | PyTorch speedup | PyTorch to target (s) | mdl s/epoch | mdl speedup "
             "| same direction? |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        runs = results[(model, r)]  # seed -> [(seconds, correct, total)]
        per_epoch, speedups, to_target, missed = [], [], [], 0
        for seed, epochs in sorted(runs.items()):
            secs = [e[0] for e in epochs]
            per_epoch.append(sum(secs) / len(secs))
            if seed in base:
                b = [e[0] for e in base[seed]]
                speedups.append(sum(b) / sum(secs) if len(b) == len(secs) else
                                (sum(b) / len(b)) / (sum(secs) / len(secs)))
            elapsed, reached = 0.0, None
            for s, correct, total in epochs:
                elapsed += s
                if correct * 100 >= target * total:
                    reached = elapsed
                    break
            if reached is None:
                missed += 1
            else:
                to_target.append(reached)
        reach = f"{statistics.median(to_target):.1f}" if to_target else "-"
        if missed:
            reach += f" ({missed} of {len(runs)} not reached)"
        m = mdl.get((model, r))
        mdl_epoch = "-" if m is None else given(num(m.get("s_per_epoch")), num(m.get("s_per_epoch_min")),
                                                num(m.get("s_per_epoch_max")), ".3f")
        mdl_speedup = "-" if m is None else given(num(m.get("speedup")), num(m.get("speedup_min")),
                                                  num(m.get("speedup_max")), ".2f", "x")
        same = "-" if r == "baseline" else direction(speedups, m)
        speedup = "1.00x" if r == "baseline" else spread(speedups, ".2f", "x")  # by definition
        lines.append(f"| {r} | {spread(per_epoch, '.3f')} | {speedup} | {reach} | "
                     f"{mdl_epoch} | {mdl_speedup} | {same} |")
    return "\n".join(lines)


def seeds_list(seeds):
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(str(s) for s in sorted(seeds))


def report(args, results, not_run, failed, skip, device_name):
    mdl, mdl_note = read_mdl_summary(args.mdl_summary, args.dev.type)
    if mdl_note:
        print(f"torch_study: {mdl_note}", flush=True)
    planned = [(m, r) for m in args.models for r in args.rows if r not in skip]
    ran_seeds = sorted({s for runs in results.values() for s in runs})
    whole = [s for s in ran_seeds if all(s in results.get(k, {}) for k in planned)]
    targets = ", ".join(([f"{args.target_default:g}%"] if args.target_default is not None else []) +
                        [f"{m} {t:g}%" for m, t in sorted(args.target_per_model.items()) if m in args.models])
    setting = (f"{args.dev}, cudnn.benchmark on, TF32 off" if args.dev.type == "cuda"
               else f"CPU, {torch.get_num_threads()} threads")
    out = ["## PyTorch beside mdl (same batches, same schedule)", "",
           f"PyTorch {torch.__version__} on {device_name} ({setting}); seeds run: {len(ran_seeds)} of {args.seeds} "
           f"asked ({len(whole)} with every row); at most {args.epochs} epoch{'s' if args.epochs > 1 else ''}; subset "
           f"{args.subset or 60000} training samples; batch {args.batch}, AdamW lr {args.lr:g}; target {targets}"
           + (f" ({args.val_samples} validation images)" if args.val_samples != 10000 else "")
           + f"; stop at target: {'yes' if args.stop_at_target else 'no'}.", "",
           "PyTorch's cells: the median over the seeds, and (min-max). s/epoch: each run's mean training seconds "
           "per epoch (validation excluded); speedup: the same seed's baseline training time over the row's (the "
           "mean epoch times' ratio where the two ran different numbers of epochs); to target: training seconds "
           "up to and including the first epoch whose validation accuracy reached the target. mdl's cells: as its "
           "summary gives them" + (f" ({args.mdl_summary})" if args.mdl_summary else "") + ".", ""]
    if mdl_note:
        out += [f"Note: {mdl_note}.", ""]
    for model in args.models:
        table = model_table(args, model, results, mdl)
        out += [f"### {model} (target {target_for(args, model):g}%)", ""]
        out += [table if table else "No run of this model ran.", ""]
    # A line per row (and its seeds) that did not run, by reason; one line for a reason every row shares.
    lines = []
    for model in args.models:
        reasons = {}  # reason -> {row: [seeds]}
        for (m, r, s), why in list(not_run.items()) + [(k, None) for k in failed]:
            if m == model:
                why = f"failed (left out of the table): {failed[(m, r, s)]}" if why is None else f"not run: {why}"
                reasons.setdefault(why, {}).setdefault(r, []).append(s)
        for why, per_row in reasons.items():
            seed_sets = {tuple(sorted(v)) for v in per_row.values()}
            runnable = [r for r in args.rows if r not in skip]
            if len(runnable) > 1 and set(per_row) == set(runnable) and len(seed_sets) == 1:
                lines.append(f"- {model}, every row, {seeds_list(per_row[runnable[0]])}: {why}")
            else:
                lines += [f"- {model} {r}, {seeds_list(per_row[r])}: {why}" for r in args.rows if r in per_row]
    if lines:
        out += ["Runs missing from the tables:", ""] + lines + [""]
    return "\n".join(out).rstrip("\n") + "\n"


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    cuda = args.dev.type == "cuda"
    if cuda:  # mdl's f32 runs without TF32; cuDNN picks its fastest algorithms
        torch.backends.cudnn.benchmark = True
        conv = getattr(torch.backends.cudnn, "conv", None)
        if hasattr(torch.backends.cuda.matmul, "fp32_precision") and hasattr(conv, "fp32_precision"):
            torch.backends.cuda.matmul.fp32_precision = "ieee"  # PyTorch 2.9 on; allow_tf32 is deprecated there
            conv.fp32_precision = "ieee"
        else:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
    device_name = torch.cuda.get_device_name(args.dev) if cuda else cpu_name()
    n = args.subset or 60000
    x = (torch.from_numpy(read_idx(args.data, FILES[0])[:n].copy()).float() / 255 - MEAN) / STD
    y = torch.from_numpy(read_idx(args.data, FILES[1])[:n].astype(np.int64))
    xt = (torch.from_numpy(read_idx(args.data, FILES[2])[:args.val_samples].copy()).float() / 255 - MEAN) / STD
    yt = torch.from_numpy(read_idx(args.data, FILES[3])[:args.val_samples].astype(np.int64))
    data = (x.unsqueeze(1), y, xt.unsqueeze(1), yt)
    if len(data[0]) < n:
        sys.exit(f"torch_study.py: {args.data} holds {len(data[0])} training images, fewer than --subset {n}")
    print(f"torch_study: PyTorch {torch.__version__} on {device_name} ({args.dev}), {torch.get_num_threads()} "
          f"threads; {n} training samples, models {','.join(args.models)}, rows {','.join(args.rows)}, "
          f"seeds 0..{args.seeds - 1}, at most {args.epochs} epochs", flush=True)

    # Rows this device cannot run at all.
    skip = {}
    for row in F16_ROWS:
        if row in args.rows and not cuda:
            skip[row] = "autocast f16 is skipped on the CPU (a GPU row)"
    if "+amp-bf16" in args.rows and cuda and not torch.cuda.is_bf16_supported():
        skip["+amp-bf16"] = f"bf16 is not supported on {device_name}"
    for r, why in skip.items():
        print(f"torch_study: {r}: {why}", flush=True)

    csv_file = csv_writer = None
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        csv_file = open(args.out, "w", newline="")
        csv_writer = csv.writer(csv_file)
        csv_writer.writerow(CSV_COLUMNS)
        csv_file.flush()

    results, not_run, failed, status = {}, {}, {}, 0
    for seed in range(args.seeds):
        for model in args.models:
            orders = None
            for row in args.rows:
                key = (model, row, seed)
                if row in skip:
                    not_run[key] = skip[row]
                    continue
                if orders is None:
                    try:
                        orders, why = load_order(args, model, seed, n)
                    except (OSError, ValueError) as e:
                        orders, why = None, f"order file unreadable: {e}"
                    if why:
                        print(f"torch_study: {model} seed {seed} skipped: {why}", flush=True)
                        for r in args.rows:
                            not_run[(model, r, seed)] = skip.get(r, why)
                        break
                if args.deadline is not None and time.monotonic() - START >= args.deadline:
                    not_run[key] = f"the deadline ({args.deadline:g} s) had passed"
                    print(f"torch_study: {model} {row} seed {seed} not started: past the deadline", flush=True)
                    continue
                print(f"== {model} {row} seed {seed} ({len(orders)} epochs of {n} samples)", flush=True)
                try:
                    epochs = train_run(args, model, row, seed, orders, data, csv_writer, csv_file)
                    results.setdefault((model, row), {})[seed] = epochs
                except Exception as e:  # report it, and go on with the next run
                    traceback.print_exc()
                    print(f"torch_study: {model} {row} seed {seed} failed: {type(e).__name__}: {e}", flush=True)
                    failed[key] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                    status = 1
                gc.collect()
                if cuda:
                    torch.cuda.empty_cache()
    if csv_file is not None:
        csv_file.close()

    section = report(args, results, not_run, failed, skip, device_name)
    print("\n" + section, flush=True)
    if args.report:
        os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
        with open(args.report, "a") as f:
            if f.tell() > 0:
                f.write("\n")
            f.write(section)
        print(f"torch_study: appended to {args.report}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
