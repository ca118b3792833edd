#!/usr/bin/python3
"""A character-level GPT on a text file, mdl and PyTorch side by side on this machine: step time.

Both train the model `mdl-train --model gpt` builds (nn/models/transformers.cpp via train/setup.cpp:
4 pre-norm blocks, 4 heads, width 128, context 64, exact GELU, no dropout, an untied bias-free head;
the parameter counts are checked equal) with AdamW (lr 1e-3, no weight decay) at the same batch
size for the same number of steps. mdl runs through mdl-train (its CSV log gives samples/s and the
epoch's mean loss, over the text's first windows); PyTorch trains on random windows of the same
text (so the losses are a sanity check, not a comparison) in its best setting on this CPU:
torch.set_num_threads(cores), OPENBLAS_NUM_THREADS=cores, OMP_WAIT_POLICY=PASSIVE; mdl-train with
the wait policy the environment gave (OpenMP's default when unset). Both step times include
loading the batch and the optimizer step.

    /usr/bin/python3 bench/compare_torch_gpt.py [--text FILE] [--steps 150] [--batch 32]

Needs `make tools` (build/latest/mdl-train) and Debian's python3-torch.
"""
import argparse, csv, os, re, subprocess, sys, tempfile, time

from thread_env import mdl_env, torch_env  # bench/thread_env.py, beside this script

CORES = os.cpu_count() or 1
if os.environ.get("MDL_COMPARE_ENV") != "1":  # set the thread environment before torch loads
    env = torch_env(CORES)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import torch
import torch.nn.functional as F

from torch_gpt import GPT  # bench/torch_gpt.py, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
MDL_TRAIN = os.environ.get("MDL_TRAIN") or os.path.join(HERE, "..", "build", "latest", "mdl-train")
CONTEXT, LAYERS, HEADS, WIDTH = 64, 4, 4, 128


def run_mdl(args, workdir):
    log = os.path.join(workdir, "mdl.csv")
    cmd = [MDL_TRAIN, "--model", "gpt", "--data", "text:" + args.text, "--epochs", "1", "--batch", str(args.batch),
           "--subset", str(args.steps * args.batch), "--optimizer", "adamw", "--lr", "1e-3", "--weight-decay", "0",
           "--seed", "0", "--log", log, "--no-progress"]
    print("mdl:", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=mdl_env()).stdout
    params = int(re.search(r"Total params: ([\d,]+)", out).group(1).replace(",", ""))
    with open(log) as f:
        row = list(csv.DictReader(f))[-1]
    return params, float(row["samples_per_second"]), float(row["train_loss"])


def run_torch(args, vocab_chars):
    torch.set_num_threads(CORES)
    torch.manual_seed(0)
    with open(args.text, encoding="utf-8", errors="replace") as f:
        text = f.read()
    stoi = {c: i for i, c in enumerate(vocab_chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.int64)
    model = GPT(vocab=len(vocab_chars), context=CONTEXT, n_layer=LAYERS, n_head=HEADS, n_embd=WIDTH)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    gen = torch.Generator().manual_seed(0)

    def step():
        starts = torch.randint(0, len(data) - CONTEXT - 1, (args.batch,), generator=gen)
        x = torch.stack([data[s:s + CONTEXT] for s in starts])
        y = torch.stack([data[s + 1:s + CONTEXT + 1] for s in starts])
        loss = F.cross_entropy(model(x).reshape(-1, len(vocab_chars)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):  # warm-up, not timed
        step()
    start, total = time.perf_counter(), 0.0
    for _ in range(args.steps):
        total += step()
    seconds = time.perf_counter() - start
    return params, args.steps * args.batch / seconds, total / args.steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    with open(args.text, encoding="utf-8", errors="replace") as f:
        vocab_chars = sorted(set(f.read()))
    print(f"torch {torch.__version__}, {CORES} cores, threads {CORES}, OMP_WAIT_POLICY=PASSIVE, "
          f"OPENBLAS_NUM_THREADS={CORES}", flush=True)
    with tempfile.TemporaryDirectory() as workdir:
        mdl_params, mdl_sps, mdl_loss = run_mdl(args, workdir)
    torch_params, torch_sps, torch_loss = run_torch(args, vocab_chars)
    if mdl_params != torch_params:
        print(f"warning: parameter counts differ: mdl {mdl_params}, torch {torch_params}")
    ms = lambda sps: 1000.0 * args.batch / sps
    print(f"\nGPT ({LAYERS} layers, {HEADS} heads, width {WIDTH}, context {CONTEXT}, vocabulary {len(vocab_chars)}, "
          f"{mdl_params:,} parameters), batch {args.batch}, {args.steps} steps, AdamW lr 1e-3")
    print(f"{'':8} {'ms/step':>8} {'samples/s':>10} {'mean loss':>10}")
    print(f"{'mdl':8} {ms(mdl_sps):8.2f} {mdl_sps:10.1f} {mdl_loss:10.4f}")
    print(f"{'PyTorch':8} {ms(torch_sps):8.2f} {torch_sps:10.1f} {torch_loss:10.4f}")
    print(f"PyTorch / mdl step time: {ms(torch_sps) / ms(mdl_sps):.2f}")


if __name__ == "__main__":
    main()
