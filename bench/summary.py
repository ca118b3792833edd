#!/usr/bin/env python3
"""The closing table of `make bench`: one row per optimization, read from the Google Benchmark
JSON files the suites wrote ($BUILD/bench/results/*.json): one row per benchmark pair of every
optimization switch (the list in switches/switches.h, which the suites publish in their JSON
context), then the few comparisons below that are not switches (two dtypes, OpenBLAS as a
yardstick, per-run options together); each with the baseline, the optimized figure, the speedup
(or memory saving) and the device. Rows whose benchmarks did not run say why (a GPU is needed,
the suite was skipped, or a filter left them out). Also written next to the JSON files as
Markdown (summary.md) and as JSON with the machine's kind (summary.json), which
`bench/results.py record` (make bench-record) keeps as that kind's current figures in bench/RESULTS.md.

With repetitions (make bench BENCH_REPS=N, Google Benchmark's --benchmark_repetitions) each side
of a row is its median run, and the gain column gives the median gain with the min and max over
the repetitions (repetition i of the baseline against repetition i of the optimized run, the
repetitions interleaved at random so that neither side is always the earlier); a row whose min-max
range reaches 1.0x is marked "within noise".

    python3 bench/summary.py build/latest/bench/results
    python3 bench/summary.py DIR --gpu "NVIDIA H200" [--ceilings roofline.json] [--command TEXT] [--commit C]
                             [--profile mdl-profile-step.log ...] [--torch torch.log]

The second form summarises a GPU machine's run (gpu_check.sh's bench_cuda.json in DIR): its rows
alone (the host's CPU rows left out), under the GPU's kind, with the ceilings mdl-roofline measured
there, the command that ran it, the bundle's commit (mdl-gpu/COMMIT) and the kernels with the most
headroom in each profiled step (mdl-profile-step --ceilings) and, with --torch (bench/torch_gpu_step.py's
lines), the GPU kernels' goals against PyTorch (bench/gpu_goals.py), for `bench/results.py record DIR`.
"""
import argparse, glob, json, os, platform, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_goals  # noqa: E402
import machine  # noqa: E402

# The optimization switches come from switches/switches.h: every suite with a switch pair publishes
# the list in its JSON context ("mdl_switches"), each pair named <switch>/off/<case> and
# <switch>/on/<case>: the same library code with the switch off and on. The rows below are not
# switches and say so in their text: two dtypes side by side, an external yardstick (OpenBLAS), or
# several per-run options together; none is a baseline written in a benchmark.
# (row, suite, baseline benchmark, optimized benchmark, metric, device)
# metric: "time" (real_time, lower is better; for a /manual_time benchmark the GPU's event time), or a
# counter name; counters in LOWER_BETTER are costs (memory, epoch time), the others rates (higher is better).
COMPARISONS = [
    ("GEMM 1024^3 f32, yardstick: OpenBLAS -> mdl", "bench_gemm", "openblas/1024", "threaded/1024", "GFLOP/s", "cpu"),
    ("matmul 1024 on the CPU, two dtypes: f32 -> f16 storage", "bench_amp", "matmul/1024/f32", "matmul/1024/f16",
     "time", "cpu"),
    ("data wait under compute, options together: none -> memory cache + prefetch 4 + 2 workers", "bench_data",
     "compute/none/w0", "compute/memory/w2/p4", "wait%", "cpu"),
    ("GEMM 4096 on tensor cores, two dtypes: f32 (no TF32) -> f16", "bench_cuda", "allow_tf32/off/gemm/4096",
     "BM_gemm_f16/4096", "TFLOP/s", "cuda"),
]
LOWER_BETTER = {"time", "peak_MB", "ms/epoch", "wait%", "kernels/step"}
# Counters Google Benchmark stores in base units (kIs1000 rates): shown in the unit the row names.
SCALE = {"GFLOP/s": 1e-9}
UNIT_NS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def load(results_dir):
    """Runs by (suite, name) (a list: one run per repetition), the suites that wrote JSON, the switch
    list, and the first context."""
    runs, suites, switches, context = {}, set(), None, None
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        suite = os.path.splitext(os.path.basename(path))[0]
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"summary: skipping {path}: {e}", file=sys.stderr)
            continue
        suites.add(suite)
        ctx = doc.get("context") or {}
        context = context or ctx
        if switches is None and "mdl_switches" in ctx:
            switches = json.loads(ctx["mdl_switches"])
        for b in doc.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
                continue
            name = re.sub(r"/(real_time|manual_time|min_time:[^/]+|iterations:\d+|repeats:\d+)", "", b["name"])
            runs.setdefault((suite, name), []).append(b)
    return runs, suites, switches or [], context


def row_specs(switches):
    """(row, kind, suite, baseline, optimized, metric, device): one per switch pair, then the comparisons."""
    for s in switches:
        for b in s["benches"]:
            yield (f"{s['name']} {b['case']}".strip(), s["kind"], b["suite"], b["off"], b["on"], b["metric"], b["device"])
    for label, suite, base, opt, metric, device in COMPARISONS:
        yield (label, "comparison", suite, base, opt, metric, device)


def value(b, metric):
    if metric == "time":
        return b["real_time"] * UNIT_NS[b.get("time_unit", "ns")] / 1e6  # ms
    v = b.get(metric)
    return None if v is None else v * SCALE.get(metric, 1.0)


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def by_name(runs, suite):
    """One suite's benchmarks by name, each its median run by time (a GPU lease runs each once)."""
    out = {}
    for (s, name), rs in runs.items():
        if s == suite:
            out[name] = sorted(rs, key=lambda b: b["real_time"])[len(rs) // 2]
    return out


def fmt(v, metric):
    unit = "ms" if metric == "time" else metric
    return f"{v:.3g} {unit}" if abs(v) < 1000 else f"{v:,.0f} {unit}"


def load_ceilings(results_dir, path=None):
    """The roofline ceilings mdl-roofline wrote beside the binaries ($BUILD/roofline.json), or None."""
    path = path or os.path.join(results_dir, os.pardir, os.pardir, "roofline.json")
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return doc if str(doc.get("format", "")).startswith("mdl-roofline") else None


def limit_of(runs, device, case, ceilings):
    """The optimized side's rate as a share of the machine's limit: "62% of FMA peak" where the
    benchmark counts FLOPs, "85% of memory bw" where it counts bytes; "" where it counts neither or
    no ceilings were measured. The median over the repetitions."""
    if not ceilings or not runs:
        return ""
    side = ceilings.get("gpu" if device == "cuda" else "cpu") or {}
    if device == "cuda":
        flops = [r["TFLOP/s"] * 1e12 for r in runs if r.get("TFLOP/s")]
        # The tensor-core rate of the case's dtype; TF32's for the optimized side of a TF32 switch.
        tf32 = "tf32/on/" in case
        unit = "f16" if "f16" in case or "bf16" in case else "tf32" if tf32 else "f32"
        peak = side.get({"f16": "f16_tensor_mflops", "tf32": "tf32_tensor_mflops", "f32": "f32_mflops"}[unit], 0) * 1e6
        peak_name = {"f16": "f16 tensor peak", "tf32": "TF32 tensor peak", "f32": "f32 peak"}[unit]
        bytes_ = [r["GB/s"] * 1e9 for r in runs if r.get("GB/s")]
        bandwidth = side.get("memory_mbps", 0) * 1e6
    else:
        flops = [r["GFLOP/s"] for r in runs if r.get("GFLOP/s")]  # stored in FLOP/s (kIs1000 rate)
        # bf16 has dot-product hardware (AVX512-BF16, AMX-BF16); the CPU GEMM widens f16 to f32 and
        # multiplies on the f32 FMA units, so f16's limit is theirs.
        bf16 = side.get("bf16_dot_mflops") or {}
        use_bf16 = "bf16" in case and bf16
        peak = max((bf16 if use_bf16 else side.get("f32_fma_mflops") or {}).values(), default=0) * 1e6
        peak_name = "bf16 FMA peak" if use_bf16 else "FMA peak"
        bytes_ = [r["bytes_per_second"] for r in runs if r.get("bytes_per_second")]
        bandwidth = side.get("memory_mbps", 0) * 1e6
    if flops and peak > 0:
        return f"{100 * median(flops) / peak:.0f}% of {peak_name}"
    if bytes_ and bandwidth > 0:
        return f"{100 * median(bytes_) / bandwidth:.0f}% of memory bw"
    return ""


def why_missing(suite, device, suites, gpu=None):
    if gpu:  # a GPU machine's run: only bench_cuda ran there
        return f"{suite} does not run in gpu_check" if suite not in suites else f"not in {suite}'s results"
    if suite not in suites:
        return f"needs a GPU ({suite} did not run)" if device == "cuda" else f"{suite} did not run"
    return f"needs a GPU (not in {suite}'s results)" if device == "cuda" else f"not in {suite}'s results (filtered out?)"


def parse_args(argv):
    """The results folder and the GPU form's options (each None, or [] for --profile, if absent)."""
    p = argparse.ArgumentParser(prog="summary.py", description="make bench's closing table (see the docstring)")
    p.add_argument("results_dir", nargs="?", default="build/latest/bench/results")
    for opt in ("--gpu", "--ceilings", "--command", "--commit", "--torch"):
        p.add_argument(opt)
    p.add_argument("--profile", action="append", default=[])
    return p.parse_args(argv)


def read_profile(path, rows=8):
    """An mdl-profile-step --ceilings log as {"title", "rows"}: its headline and the device kernels
    with the most headroom (the table is sorted by it), each row's columns by the table's names."""
    with open(path) as f:
        lines = f.read().splitlines()
    title = next((l.lstrip("= ").strip() for l in lines if l.startswith("== mdl ")), os.path.basename(path))
    head = next((i for i, l in enumerate(lines) if l.startswith("Name ")), None)
    if head is None:
        sys.exit(f"summary.py: {path} holds no profiler table")
    # Fixed-width columns, text left-aligned and numbers right-aligned under their names, a cell
    # possibly blank: each value goes to the column its characters overlap most.
    cols = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)*", lines[head])]
    kept = []
    for l in lines[head + 2:]:
        if l.startswith("---"):
            break
        row = {}
        for m in re.finditer(r"\S+", l):
            def overlap(c):
                return min(m.end(), c[2]) - max(m.start(), c[1])
            row[max(cols, key=overlap)[0]] = m.group()
        if row.get("Kind") == "device_kernel":
            kept.append(row)
    return {"title": title, "rows": kept[:rows]}


def main():
    args = parse_args(sys.argv[1:])
    results_dir, gpu, ceilings_path, command, commit, profiles = (args.results_dir, args.gpu, args.ceilings,
                                                                  args.command, args.commit, args.profile)
    if not os.path.isdir(results_dir):
        sys.exit(f"summary.py: no results folder {results_dir} (make bench writes build/<config>/bench/results)")
    if args.torch and not os.path.isfile(args.torch):
        print(f"summary.py: no {args.torch}: the goals against PyTorch are left out", file=sys.stderr)
    runs, suites, switches, context = load(results_dir)
    ceilings = load_ceilings(results_dir, ceilings_path)
    this_machine = machine.gpu_machine(gpu) if gpu else machine.machine()
    if gpu and context and context.get("num_cpus"):
        this_machine["cores"] = context["num_cpus"]  # the GPU machine's host, not this one
    header = ("optimization", "kind", "baseline", "optimized", "gain", "% of limit", "device")
    rows, records = [], []
    repeated = False
    for label, kind, suite, base, opt, metric, device in row_specs(switches):
        if gpu and device != "cuda":
            continue
        vb = [value(b, metric) for b in runs.get((suite, base), [])]
        vo = [value(o, metric) for o in runs.get((suite, opt), [])]
        pairs = [(x, y) for x, y in zip(vb, vo) if x is not None and y is not None and x > 0 and y > 0]
        if not pairs:
            rows.append((label, kind, "-", "-", why_missing(suite, device, suites, gpu), "", device))
            continue
        mb, mo = median([x for x, _ in pairs]), median([y for _, y in pairs])
        if metric == "wait%":
            gains = [x - y for x, y in pairs]
            gain_text = f"{median(gains):.1f} points less waiting"
        else:
            gains = [x / y if metric in LOWER_BETTER else y / x for x, y in pairs]
            gain_text = f"{median(gains):.2f}x" + (" less memory" if metric == "peak_MB" else "")
        if len(pairs) > 1:
            repeated = True
            unit = "" if metric == "wait%" else "x"
            gain_text += f" ({min(gains):.2f}-{max(gains):.2f}{unit} over {len(pairs)})"
            no_change = 0.0 if metric == "wait%" else 1.0
            if min(gains) <= no_change <= max(gains):
                gain_text += ", within noise"
        limit = limit_of(runs.get((suite, opt), []), device, opt, ceilings)
        rows.append((label, kind, fmt(mb, metric), fmt(mo, metric), gain_text, limit, device))
        records.append({"row": label, "kind": kind, "device": device, "suite": suite, "metric": metric,
                        "baseline": mb, "optimized": mo, "baseline_text": fmt(mb, metric),
                        "optimized_text": fmt(mo, metric), "gain": median(gains), "gain_min": min(gains),
                        "gain_max": max(gains), "runs": len(pairs), "gain_text": gain_text, "limit_text": limit})
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths))
    cpus = context.get("num_cpus") if context else "?"
    print(f"\n== make bench summary ({platform.node()}, {cpus} CPUs, results in {results_dir})")
    if not switches:
        print("(no suite's JSON holds the switch list, mdl_switches: only the comparisons are shown)")
    if ceilings is None:
        print("(no roofline.json beside the binaries: run `make roofline` for the % of limit column)")
    if not repeated:
        print("(one run per benchmark: a gain near 1.0x may be noise; BENCH_REPS=3, the default, gives each row its spread)")
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    with open(os.path.join(results_dir, "summary.md"), "w") as f:
        f.write("| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n")
        for r in rows:
            f.write("| " + " | ".join(str(c) for c in r) + " |\n")
    with open(os.path.join(results_dir, "summary.json"), "w") as f:
        doc = {"machine": this_machine, "date": (context or {}).get("date", ""), "rows": records}
        if command:
            doc["command"] = command
        if gpu and ceilings:
            doc["ceilings"] = ceilings
        if profiles:
            doc["profiles"] = [read_profile(p) for p in profiles]
        if gpu and args.torch:
            doc["goals"] = gpu_goals.goals(by_name(runs, "bench_cuda"), gpu_goals.torch_figures(args.torch))
        if gpu:  # run elsewhere: its own commit (the bundle's) and the date it ran
            doc["commit"] = commit or "?"
            ran = (context or {}).get("date", "")  # 2026-12-04T18:21:30+00:00
            doc["recorded"] = f"{ran[:16].replace('T', ' ')} UTC" if ran.endswith("+00:00") else ran or "?"
        json.dump(doc, f, indent=1)
    print(f"(this machine's kind: {this_machine['kind']}; bench/results.py record {results_dir} keeps these figures "
          "in bench/RESULTS.md)")


if __name__ == "__main__":
    main()
