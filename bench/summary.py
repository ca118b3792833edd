#!/usr/bin/env python3
"""The closing table of `make bench`: one row per optimization, read from the Google Benchmark
JSON files the suites wrote ($BUILD/bench/results/*.json): one row per benchmark pair of every
optimization switch (the list in switches/switches.h, which the suites publish in their JSON
context), then the comparisons below; each with the baseline, the optimized figure, the speedup
(or memory saving) and the device. Rows whose benchmarks did not run say why (a GPU is needed,
the suite was skipped, or a filter left them out). Also written as Markdown next to the
JSON files (summary.md), for bench/RESULTS.md.

    python3 bench/summary.py build/latest/bench/results
"""
import glob, json, os, platform, re, sys

# The optimization switches come from switches/switches.h: every suite with a switch pair publishes
# the list in its JSON context ("mdl_switches"), each pair named <switch>/off/<case> and
# <switch>/on/<case>. The rows below are comparisons, not switches: two implementations or
# dtypes side by side, with nothing to flip.
# (row, suite, baseline benchmark, optimized benchmark, metric, device)
# metric: "time" (real_time, lower is better), or a counter name; counters in LOWER_BETTER are
# costs (memory, epoch time), the others rates (higher is better).
COMPARISONS = [
    ("GEMM 1024^3 f32: naive loop -> mdl packed+threaded", "bench_gemm", "naive/1024", "threaded/1024", "GFLOP/s", "cpu"),
    ("GEMM 1024^3 f32: mdl vs OpenBLAS (yardstick)", "bench_gemm", "openblas/1024", "threaded/1024", "GFLOP/s", "cpu"),
    ("matmul 1024 on the CPU: f32 -> f16 storage", "bench_amp", "matmul/1024/f32", "matmul/1024/f16", "time", "cpu"),
    ("data wait under compute: synchronous -> cache+prefetch+2 workers", "bench_data", "compute/none/w0",
     "compute/memory/w2/p4", "wait%", "cpu"),
    ("f16 tensor-core GEMM 4096: f32 (no TF32) -> f16", "bench_cuda", "allow_tf32/off/gemm/4096", "BM_gemm_f16/4096",
     "TFLOP/s", "cuda"),
    ("exp 1M f32: libm per element -> vector polynomial", "bench_elementwise", "BM_ExpLibm/1048576",
     "BM_Exp/1048576", "time", "cpu"),
    ("tanh 1M f32: libm per element -> vector polynomial", "bench_elementwise", "BM_TanhLibm/1048576",
     "BM_Tanh/1048576", "time", "cpu"),
    ("GELU (erf) fwd 1M f32: libm erf per element -> vector polynomial", "bench_elementwise", "BM_GeluLibm/1048576",
     "BM_Gelu/1048576", "time", "cpu"),
    ("GELU (erf) bwd 1M f32: composed from ops -> one fused pass", "bench_elementwise", "BM_GeluBackwardComposed",
     "BM_GeluBackwardFused", "time", "cpu"),
    ("ReLU backward masked_fill 4M f32: branchy ternary -> bit select", "bench_elementwise", "BM_MaskedFillTernary",
     "BM_MaskedFill", "time", "cpu"),
]
LOWER_BETTER = {"time", "peak_MB", "ms/epoch", "wait%"}
# Counters Google Benchmark stores in base units (kIs1000 rates): shown in the unit the row names.
SCALE = {"GFLOP/s": 1e-9}
UNIT_NS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def load(results_dir):
    """Runs by (suite, name), the suites that wrote JSON, the switch list, and the first context."""
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
            name = re.sub(r"/(real_time|min_time:[^/]+|iterations:\d+|repeats:\d+)", "", b["name"])
            runs[(suite, name)] = b
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


def fmt(v, metric):
    unit = "ms" if metric == "time" else metric
    return f"{v:.3g} {unit}" if abs(v) < 1000 else f"{v:,.0f} {unit}"


def why_missing(suite, device, suites):
    if suite not in suites:
        return f"needs a GPU ({suite} did not run)" if device == "cuda" else f"{suite} did not run"
    return f"needs a GPU (not in {suite}'s results)" if device == "cuda" else f"not in {suite}'s results (filtered out?)"


def main():
    results_dir = sys.argv[1] if len(sys.argv) > 1 else "build/latest/bench/results"
    runs, suites, switches, context = load(results_dir)
    header = ("optimization", "kind", "baseline", "optimized", "gain", "device")
    rows = []
    for label, kind, suite, base, opt, metric, device in row_specs(switches):
        b, o = runs.get((suite, base)), runs.get((suite, opt))
        vb, vo = (value(b, metric) if b else None), (value(o, metric) if o else None)
        if vb is None or vo is None or vb <= 0 or vo <= 0:
            rows.append((label, kind, "-", "-", why_missing(suite, device, suites), device))
            continue
        lower = metric in LOWER_BETTER
        gain = vb / vo if lower else vo / vb
        gain_text = f"{gain:.2f}x less memory" if metric == "peak_MB" else f"{gain:.2f}x"
        if metric == "wait%":
            gain_text = f"{vb - vo:.1f} points less waiting"
        rows.append((label, kind, fmt(vb, metric), fmt(vo, metric), gain_text, device))
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths))
    cpus = context.get("num_cpus") if context else "?"
    print(f"\n== make bench summary ({platform.node()}, {cpus} CPUs, results in {results_dir})")
    if not switches:
        print("(no suite's JSON holds the switch list, mdl_switches: only the comparisons are shown)")
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    with open(os.path.join(results_dir, "summary.md"), "w") as f:
        f.write("| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n")
        for r in rows:
            f.write("| " + " | ".join(str(c) for c in r) + " |\n")


if __name__ == "__main__":
    main()
