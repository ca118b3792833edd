"""The GPU kernels' goals, mdl against PyTorch eager on the same card in the same minutes: each goal
read from a lease's bench_cuda JSON (gpu_check.sh's bench_cuda.json) and PyTorch's lines
(bench/torch_gpu_step.py's torch.log), with the figure, PyTorch's, their ratio, the goal and whether
it is met. bench/summary.py --gpu keeps them in the card's summary.json, bench/results.py prints
them under the card's table in bench/RESULTS.md.
"""


def torch_figures(path):
    """PyTorch's lines as {name: value}: ms per step or per call, us for batch norm and the op chain."""
    figures = {}
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("torch_"):
                    fields = line.split()
                    try:
                        figures[fields[0][len("torch_"):]] = float(fields[1])
                    except (IndexError, ValueError):
                        pass
    except OSError:
        pass
    return figures


def _ms(r):
    """A benchmark's time in ms (its real_time: the GPU's per call for /manual_time rows)."""
    return r["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[r.get("time_unit", "ns")]


def goals(runs, torch):
    """The goals whose figures ran: a list of {goal, mdl, pytorch, ratio, target, met} (ratio: the figure
    the goal bounds). runs maps a
    benchmark's name (without /real_time or /manual_time) to its JSON record; torch is torch_figures'."""
    out = []

    def add(goal, mdl, pytorch, ratio, op, target):
        met = ratio <= target if op == "<=" else ratio >= target
        out.append({"goal": goal, "mdl": mdl, "pytorch": pytorch, "ratio": round(ratio, 3),
                    "target": f"{op} {target:g}", "met": met})

    # Attention: mdl's time over PyTorch SDPA's (lower is better).
    for part, target in (("fwd", 1.2), ("fwd_bwd", 1.0)):
        r = runs.get(f"flash_attention_mma/on/f16/causal_b32_h6_t256_d64/{part}")
        t = torch.get(f"sdpa_f16_causal_b32_h6_t256_d64_{part}")
        if r and t:
            add(f"causal attention B32 H6 T256 D64 f16, {'forward' if part == 'fwd' else 'forward + backward'}: "
                "time over SDPA's", f"{_ms(r) * 1e3:.1f} us", f"{t * 1e3:.1f} us", _ms(r) / t, "<=", target)
    # Training steps: PyTorch's time over mdl's, mdl's speed (higher is better).
    steps = (("GPT 6x384 b32 step f32", "BM_gpt_step_f32", "gpt_step_f32", 1.0),
             ("GPT f32, attention on 3xTF32", "flash_attention_tf32x3/on/gpt_step_f32", "gpt_step_f32", 1.0),
             ("GPT step AMP", "BM_gpt_step_amp", "gpt_step_amp", 1.5),
             ("ResNet-18 b128 step f32", "BM_resnet18_step_f32", "resnet18_step_f32", 1.1),
             ("ResNet-18 step AMP, NCHW", "BM_resnet18_step_amp", "resnet18_step_amp", 1.3),
             ("ResNet-18 step AMP, channels-last on both", "channels_last/on/resnet18_step_amp",
              "resnet18_step_amp_channels_last", 1.3))
    for goal, name, torch_name, target in steps:
        r, t = runs.get(name), torch.get(torch_name)
        if r and t:
            host = f", host {r['host_ms/step']:.2f} ms" if "host_ms/step" in r else ""
            add(f"{goal}: speed over PyTorch's", f"{_ms(r):.2f} ms{host}", f"{t:.2f} ms", t / _ms(r), ">=", target)
    # AMP over f32 within mdl, and PyTorch's for comparison.
    f32 = runs.get("BM_resnet18_step_f32")
    for goal, name, torch_name in (("ResNet-18 AMP over f32, NCHW", "BM_resnet18_step_amp", "resnet18_step_amp"),
                                   ("ResNet-18 AMP over f32, channels-last", "channels_last/on/resnet18_step_amp",
                                    "resnet18_step_amp_channels_last")):
        r, t32, t = runs.get(name), torch.get("resnet18_step_f32"), torch.get(torch_name)
        if f32 and r:
            theirs = f"{t32 / t:.2f}x" if t and t32 else ""
            add(goal, f"{_ms(f32) / _ms(r):.2f}x", theirs, _ms(f32) / _ms(r), ">=", 2.0)
    # Batch norm against the card's bandwidth: the vectorised add's rate over batch norm's.
    add_rate = (runs.get("BM_add_contiguous_vec16") or {}).get("GB/s")
    for goal, name in (("batch norm (128, 64, 32, 32) f16 fwd + bwd", "BM_batch_norm_f16"),
                       ("the same, statistics packed", "batch_norm_packed_stats/on/bn_f16_128x64x32x32")):
        r = runs.get(name)
        if r and add_rate and r.get("GB/s"):
            t = torch.get("batch_norm_f16")
            add(f"{goal}: times the bandwidth's time", f"{_ms(r) * 1e3:.1f} us, {r['GB/s']:.0f} GB/s",
                f"{t:.1f} us" if t else "", add_rate / r["GB/s"], "<=", 1.3)
    r = runs.get("BM_gpt_step_amp")
    if r and "copies/step" in r:
        add("GPT AMP copy kernels per step", f"{r['copies/step']:.0f}", "", r["copies/step"], "<=", 60)
    return out


def goal_lines(rows):
    """The goals as a Markdown table (nothing when none ran)."""
    if not rows:
        return []
    lines = ["", "The GPU kernels' goals, mdl against PyTorch eager on this card in the same minutes (TF32 off on "
             "both sides; figure: mdl's time over PyTorch's where lower is better, PyTorch's over mdl's (mdl's speed) "
             "where higher is, or a count):", "", "| goal | mdl | PyTorch | figure | target | met |",
             "|---|---|---|---|---|---|"]
    for g in rows:
        lines.append(f"| {g['goal']} | {g['mdl']} | {g['pytorch'] or '-'} | {g['ratio']:.2f} | {g['target']} | "
                     f"{'met' if g['met'] else 'missed'} |")
    return lines
