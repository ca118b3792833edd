#!/usr/bin/env python3
"""The closing table of `make bench`: one row per optimization, read from the Google Benchmark
JSON files the suites wrote (build/bench/results/*.json): what it is, the baseline, the
optimized figure, the speedup (or memory saving) and the device. Rows whose benchmarks did not
run say why (a GPU is needed, or the suite was skipped). Also written as Markdown next to the
JSON files (summary.md), for bench/RESULTS.md.

    python3 bench/summary.py build/bench/results
"""
import glob, json, os, platform, re, sys

# (row, suite, baseline benchmark, optimized benchmark, metric, device)
# metric: "time" (real_time, lower is better), or a counter name; counters in LOWER_BETTER are
# costs (memory, epoch time), the others rates (higher is better).
ROWS = [
    ("GEMM 1024^3 f32: naive loop -> mdl packed+threaded", "bench_gemm", "naive/1024", "threaded/1024", "GFLOP/s", "cpu"),
    ("GEMM 1024^3 f32: mdl vs OpenBLAS (yardstick)", "bench_gemm", "openblas/1024", "threaded/1024", "GFLOP/s", "cpu"),
    ("depthwise 3x3 conv fwd: im2col+GEMM -> direct", "bench_conv", "fwd/depthwise_3x3_c128_32x32_b32/im2col",
     "fwd/depthwise_3x3_c128_32x32_b32/direct", "time", "cpu"),
    ("depthwise 3x3 conv bwd: im2col+GEMM -> direct", "bench_conv", "bwd/depthwise_3x3_c128_32x32_b32/im2col",
     "bwd/depthwise_3x3_c128_32x32_b32/direct", "time", "cpu"),
    ("max pool 2x2 fwd (128x32x28x28 f32): scalar loop -> 4-float vectors", "bench_conv",
     "max_pool_2x2_b128_c32_28x28/scalar", "max_pool_2x2_b128_c32_28x28/vector", "time", "cpu"),
    ("conv 3x3 64->128 32x32 b32 fwd+bwd: standard -> depthwise separable", "bench_conv",
     "conv_3x3_64to128_32x32_b32_fwd_bwd/standard", "conv_3x3_64to128_32x32_b32_fwd_bwd/separable", "time", "cpu"),
    ("training step b128: SimpleCNN -> SeparableCNN (lighter architecture)", "bench_conv",
     "cnn_train_step_b128/simple_cnn", "cnn_train_step_b128/separable_cnn", "time", "cpu"),
    ("fused vs unfused bias+activation (linear 512x1024->1024 relu, fwd+bwd)", "bench_linear", "linear_fwd_bwd/relu/composed",
     "linear_fwd_bwd/relu/fused", "time", "cpu"),
    ("softmax+cross-entropy fwd+bwd: composed -> fused", "bench_fusion", "cross_entropy_fwd_bwd/composed",
     "cross_entropy_fwd_bwd/fused", "time", "cpu"),
    ("layer_norm fwd+bwd: composed -> fused", "bench_fusion", "layer_norm_fwd_bwd/composed", "layer_norm_fwd_bwd/fused",
     "time", "cpu"),
    ("attention fwd+bwd: composed -> fused", "bench_attention", "BM_ComposedForwardBackward", "BM_FusedForwardBackward",
     "time", "cpu"),
    ("AdamW step, 10M params: composed -> fused", "bench_optim", "BM_AdamWUnfused/10000000", "BM_AdamWFused/10000000",
     "time", "cpu"),
    ("matmul 1024 on the CPU: f32 -> f16 storage", "bench_amp", "matmul/1024/f32", "matmul/1024/f16", "time", "cpu"),
    ("SimpleCNN step b128 on the CPU: f32 -> autocast f16", "bench_amp", "simplecnn_train_step_b128/f32",
     "simplecnn_train_step_b128/autocast_f16", "time", "cpu"),
    ("SimpleCNN autocast f16 step: 16-bit values converted one by one -> F16C blocks", "bench_amp",
     "simplecnn_train_step_b128/autocast_f16_per_element", "simplecnn_train_step_b128/autocast_f16", "time", "cpu"),
    ("f16 add (128x32x28x28): one by one -> F16C blocks", "bench_amp", "f16_add_b128_c32_28x28/per_element",
     "f16_add_b128_c32_28x28/bulk", "time", "cpu"),
    ("data: no cache -> memory cache (1 worker, no compute)", "bench_data", "load/none/w1/p4", "load/memory/w1/p4",
     "ms/epoch", "cpu"),
    ("data: no prefetch -> prefetch 4 (1 worker, compute)", "bench_data", "compute/none/w1/p0", "compute/none/w1/p4",
     "ms/epoch", "cpu"),
    ("data wait under compute: synchronous -> cache+prefetch+2 workers", "bench_data", "compute/none/w0",
     "compute/memory/w2/p4", "wait%", "cpu"),
    ("data: 1 -> 2 decoding workers (PNG, no cache)", "bench_data", "load/none/w1/p4", "load/none/w2/p4", "ms/epoch", "cpu"),
    ("data: file cache reused across runs (1 worker)", "bench_data", "load/none/w1/p4", "load/file/w1/p4", "ms/epoch", "cpu"),
    ("grad accumulation 4x128 vs batch 512: peak memory", "bench_accumulate", "simplecnn_step_512/one_batch",
     "simplecnn_step_512/accumulate_4x128", "peak_MB", "cpu"),
    ("host->device copy 16 MiB: pageable -> pinned", "bench_data", "h2d/pageable/16777216", "h2d/pinned/16777216",
     "time", "cuda"),
    ("f16 tensor-core GEMM 4096: f32 (no TF32) -> f16", "bench_cuda", "BM_gemm_f32/4096", "BM_gemm_f16/4096", "TFLOP/s",
     "cuda"),
    ("fused vs unfused bias+activation (f16 8192x1024->4096, relu): cuBLASLt epilogue", "bench_cuda",
     "BM_linear_relu_unfused", "BM_linear_relu_fused", "time", "cuda"),
    ("data: batch copy on mdl's stream -> loader side stream (GPU step)", "bench_cuda", "BM_loader_copy_sync",
     "BM_loader_copy_side_stream", "time", "cuda"),
    ("op chain: eager launches -> CUDA Graph replay", "bench_cuda", "BM_chain_eager", "BM_chain_graph", "time", "cuda"),
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
    ("transpose 4096^2 f32 (.t().contiguous()): row by row -> 32x32 tiles", "bench_elementwise",
     "BM_TransposedCopyRows", "BM_TransposedCopy", "time", "cpu"),
    ("CPU large-block cache: add 16M f32 into a fresh 64 MiB output", "bench_cpu_cache",
     "add_fresh_output_16M/uncached", "add_fresh_output_16M/cached", "time", "cpu"),
    ("device alloc+free: cudaMalloc -> caching allocator", "bench_cuda", "BM_alloc_cudamalloc", "BM_alloc_caching", "time",
     "cuda"),
]
LOWER_BETTER = {"time", "peak_MB", "ms/epoch", "wait%"}
# Counters Google Benchmark stores in base units (kIs1000 rates): shown in the unit the row names.
SCALE = {"GFLOP/s": 1e-9}
UNIT_NS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def load(results_dir):
    runs, context = {}, None
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        suite = os.path.splitext(os.path.basename(path))[0]
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"summary: skipping {path}: {e}", file=sys.stderr)
            continue
        context = context or doc.get("context")
        for b in doc.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
                continue
            name = re.sub(r"/(real_time|min_time:[^/]+|iterations:\d+|repeats:\d+)", "", b["name"])
            runs[(suite, name)] = b
    return runs, context


def value(b, metric):
    if metric == "time":
        return b["real_time"] * UNIT_NS[b.get("time_unit", "ns")] / 1e6  # ms
    v = b.get(metric)
    return None if v is None else v * SCALE.get(metric, 1.0)


def fmt(v, metric):
    unit = "ms" if metric == "time" else metric
    return f"{v:.3g} {unit}" if abs(v) < 1000 else f"{v:,.0f} {unit}"


def main():
    results_dir = sys.argv[1] if len(sys.argv) > 1 else "build/bench/results"
    runs, context = load(results_dir)
    header = ("optimization", "baseline", "optimized", "gain", "device")
    rows = []
    for label, suite, base, opt, metric, device in ROWS:
        b, o = runs.get((suite, base)), runs.get((suite, opt))
        vb, vo = (value(b, metric) if b else None), (value(o, metric) if o else None)
        if vb is None or vo is None or vb <= 0 or vo <= 0:
            why = "needs a GPU (none here)" if device == "cuda" else f"{suite} did not run"
            rows.append((label, "-", "-", why, device))
            continue
        lower = metric in LOWER_BETTER
        gain = vb / vo if lower else vo / vb
        gain_text = f"{gain:.2f}x less memory" if metric == "peak_MB" else f"{gain:.2f}x"
        if metric == "wait%":
            gain_text = f"{vb - vo:.1f} points less waiting"
        rows.append((label, fmt(vb, metric), fmt(vo, metric), gain_text, device))
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(5)]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths))
    cpus = context.get("num_cpus") if context else "?"
    print(f"\n== make bench summary ({platform.node()}, {cpus} CPUs, results in {results_dir})")
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    with open(os.path.join(results_dir, "summary.md"), "w") as f:
        f.write("| " + " | ".join(header) + " |\n|" + "---|" * 5 + "\n")
        for r in rows:
            f.write("| " + " | ".join(str(c) for c in r) + " |\n")


if __name__ == "__main__":
    main()
