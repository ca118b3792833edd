#!/usr/bin/env bash
# make gpu-check: the one run on a GPU machine. Runs the CUDA test cases, bench/bench_cuda and
# (where python3 has PyTorch with CUDA) bench/torch_gpu_step.py, measures the card's roofline
# ceilings (mdl-roofline), then a per-op profile of one GPT and one ResNet-18 AMP step in mdl
# (mdl-profile-step, with the roofline columns) and in PyTorch (torch.profiler), and prints one
# table. Two ways to run it:
#   in a checkout, with nvcc: `make gpu-check` builds for sm_90 first (build/cuda-...-sm90) and
#     also runs the rest of the test suite;
#   from the bundle `make gpu-bundle` packed (no build, no doctest or Google Benchmark needed):
#     tar xf mdl-gpu.tar.xz && mdl-gpu/gpu_check.sh [LOG_DIR]
# A failing step is named and the next one still runs; the exit status is nonzero if any step
# failed. Each step's log is in LOG_DIR (build/gpu-check/logs, or mdl-gpu/logs from the bundle),
# and all of them, the table first, in LOG_DIR/gpu-check.log.
# TORCH_PROFILES=0 leaves out PyTorch's two op tables (80 s of the budget).
# Budget: at most GPU_CHECK_BUDGET (below; 480 s by default) from the bundle (the step timeouts add up to 1220 s, 1140 with
# TORCH_PROFILES=0; a build adds 220 and the other tests 70). The 74 CUDA cases (cuda: and cuda
# strict:) and 80 benchmarks fill much of their steps' caps: a step cut off loses its summary.
# GPU_CHECK_BUDGET (seconds, default 480) bounds the whole run: each step gets what is left of it
# less 20 s, at most its own cap, and once under 20 s are left the steps are skipped, so a step
# that hangs still leaves time for the table, the card's summary and whatever packs the logs after.
# What it records: f16 tensor-core GEMM TFLOP/s at 4096 and 8192 next to cuBLAS's own
# (PyTorch's matmul); SimpleCNN, ResNet-18 (32x32) and GPT (6 x 384, context 256) training steps in
# f32 and AMP next to PyTorch eager; fused vs unfused bias+activation (cuBLASLt epilogue); pinned vs
# pageable host-to-device bandwidth; a DataLoader epoch copying on a side stream vs on mdl's stream,
# with the share of time waiting for data; training steps replayed as CUDA Graphs (reported as
# errors, not failures, where an op cannot be captured yet); where a step's GPU time goes, op by op.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
LOG=""
[ -n "${1:-}" ] && LOG=$(mkdir -p "$1" && cd "$1" && pwd)  # a LOG_DIR given is taken from the caller's folder
if [ -x "$HERE/bin/mdl_tests" ]; then BUNDLE=1; cd "$HERE"; else BUNDLE=0; cd "$HERE/.."; fi
MAKE=${MAKE:-make}
LOG=${LOG:-$([ $BUNDLE = 1 ] && echo logs || echo build/gpu-check/logs)}
mkdir -p "$LOG"
exec > >(tee "$LOG/console.log") 2>&1
JOBS=-j$(nproc)
declare -a STEPS RESULTS DETAILS
failed=0

BUDGET=${GPU_CHECK_BUDGET:-480}
case $BUDGET in '' | *[!0-9]*) echo "gpu_check: GPU_CHECK_BUDGET must be a number of seconds, got '$BUDGET'" >&2; exit 2 ;; esac
step() {  # step NAME TIMEOUT_S CMD...
  local name=$1 t=$2; shift 2
  local left=$((BUDGET - SECONDS - 20))
  if [ $left -le 0 ]; then
    echo "== $name: skipped (GPU_CHECK_BUDGET=$BUDGET s spent)" | tee "$LOG/$name.log"
    STEPS+=("$name") RESULTS+=("SKIPPED") DETAILS+=("the run's budget of $BUDGET s was spent")
    failed=1
    return
  fi
  [ $t -gt $left ] && t=$left
  echo "== $name"
  local start=$SECONDS
  timeout "$t" "$@" >"$LOG/$name.log" 2>&1
  local rc=$?
  local dt=$((SECONDS - start))
  STEPS+=("$name")
  if [ $rc -eq 0 ]; then RESULTS+=("ok"); else RESULTS+=("FAILED rc=$rc"); failed=1; fi
  DETAILS+=("${dt}s, $(tail -n 1 "$LOG/$name.log" | cut -c1-90)")
  [ $rc -eq 0 ] || { echo "!! step $name failed (rc=$rc); last lines of $LOG/$name.log:"; tail -n 25 "$LOG/$name.log"; }
}

echo "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee "$LOG/device.log"

# cuDNN and NCCL may live only in python's nvidia-* wheels (PyTorch's). A build is then told their
# folders (CUDNN_HOME=, NCCL_HOME=); the bundle's binaries get the wheel's library folder in
# LD_LIBRARY_PATH (gpu_libs.sh).
. "$HERE/gpu_libs.sh"

if [ $BUNDLE = 1 ]; then
  B=bin BENCH=bin/bench_cuda
  bundle_library_path "$HERE"
  echo "== bundle: $HERE${MISSING_LIBS:+; libraries not found: $MISSING_LIBS}"
else
  CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  declare -a HOMES
  for lib in cudnn nccl; do
    if [ ! -e "$CUDA_HOME/include/$lib.h" ] && [ ! -e "/usr/include/$lib.h" ]; then
      header=$(wheel_file "$lib.h")
      [ -n "$header" ] && HOMES+=("${lib^^}_HOME=$(dirname "$(dirname "$header")")")
    fi
  done
  # dist/ builds with NCCL alone (its world-size-1 case runs in cuda-tests); MPI joins where mpicxx is.
  MPI_SWITCH=0
  command -v mpicxx >/dev/null 2>&1 && MPI_SWITCH=1
  echo "== libraries: MPI=$MPI_SWITCH ${HOMES[*]:-(cuDNN and NCCL from $CUDA_HOME)}"
  SWITCHES=(CUDA=1 MPI=$MPI_SWITCH "${HOMES[@]}" MDL_CUDA_ARCH=90)
  B=$($MAKE -s --no-print-directory print-build "${SWITCHES[@]}")
  BENCH=$B/bench/bench_cuda
  echo "== build: $B"
  step build 220 $MAKE $JOBS "${SWITCHES[@]}" $B/mdl_tests $BENCH $B/mdl-profile-step $B/mdl-roofline
fi
step cuda-tests 200 $B/mdl_tests -tc='cuda:*,cuda strict:*'
[ $BUNDLE = 1 ] || step other-tests 70 $B/mdl_tests -tce='cuda:*,cuda strict:*'
# The register-tiled attention kernels (f16/bf16, and f32 on 3xTF32) under compute-sanitizer's
# memcheck: out-of-bounds shared or global accesses, misaligned ldmatrix/cp.async addresses.
SANITIZER=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
if [ -x "$SANITIZER" ]; then
  step memcheck-attention 150 "$SANITIZER" --tool memcheck --error-exitcode 1 $B/mdl_tests \
    -tc='cuda: register-tiled and WMMA flash attention agree*,cuda: 3xTF32 and FMA flash attention agree*'
  # The kernels built since the last lease, on their smaller cases: linear_act's backward, layer and
  # group norm's rows, the packed batch norm passes (the bf16 range case), the context's counters.
  step memcheck-norms 90 "$SANITIZER" --tool memcheck --error-exitcode 1 $B/mdl_tests \
    -tc="cuda: linear_act*,cuda: layer_norm and group_norm*,cuda: batch_norm's packed statistics keep bf16*,cuda: *block counters*"
else
  echo "== memcheck-attention: skipped (no compute-sanitizer)"
fi
step bench-cuda 240 $BENCH --benchmark_min_time=0.3 --benchmark_out="$LOG/bench_cuda.json" \
  --benchmark_out_format=json
# Batch norm's f16 step kernel by kernel (its goal: within 1.3x of bandwidth), NCHW and channels-last:
# Nsight Compute's time and DRAM bytes for each kernel of about four steps, with the statistics passes
# packed (on) and not (off). Informational: where ncu cannot read the counters the log says so.
NCU=$(command -v ncu || echo "${CUDA_HOME:-/usr/local/cuda}/bin/ncu")
if [ -x "$NCU" ]; then
  for case in f16 f16_nhwc; do
    for side in off on; do
      step "ncu-bn-$case-$side" 45 bash -c '"$@" || echo "ncu: no kernel figures (exit $?)"' ncu "$NCU" \
        --clock-control none --csv --print-units base --launch-skip 40 --launch-count 40 \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
        $BENCH --benchmark_filter="^batch_norm_packed_stats/$side/bn_${case}_128x64x32x32/" --benchmark_min_time=0.01
    done
  done
else
  echo "== ncu-batch-norm: skipped (no ncu)"
fi
# Which algorithms cuDNN measured and which were taken, for the 3x3 conv's measured and heuristic
# choices (on the H200 the measured one ran 0.83x the heuristic's): MDL_CUDNN_LOG's lists, in the log.
step cudnn-choices 40 env MDL_CUDNN_LOG=1 $BENCH --benchmark_filter='cudnn_benchmark/(on|off)/conv3x3' \
  --benchmark_min_time=0.05
TORCH=0
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1 && TORCH=1
if [ $TORCH = 1 ]; then
  step torch 60 python3 bench/torch_gpu_step.py
else
  echo "== torch: skipped (python3 has no PyTorch with CUDA)"
fi
# The machine code of the kernels built without a GPU, for reading afterwards where there is no
# disassembler: every kernel's registers, shared memory and spills, and the SASS of the packed batch
# norm passes, linear_act's backward sums, the warp-per-row norm forward and the 3xTF32 forward.
CUOBJDUMP=$(command -v cuobjdump || echo "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump")
if [ -x "$CUOBJDUMP" ]; then
  step sass 40 bash -c '"$1" -res-usage "$2" >"$3/resource-usage.txt" &&
    "$1" -sass "$2" | awk "/Function : /{keep = /$4/} keep" >"$3/sass-selected.txt" &&
    echo "$(grep -c "Function : " "$3/sass-selected.txt") kernels in sass-selected.txt" \
      "($(wc -c <"$3/sass-selected.txt") bytes), resource usage of all in resource-usage.txt"' _ \
    "$CUOBJDUMP" $B/mdl_tests "$LOG" \
    'bn_partial_stats|bn_partial_grad|bn_packed_rows|act_backward_sums|gn_forward_warp|flash_forward_tf32'
else
  echo "== sass: skipped (no cuobjdump)"
fi
# The card's ceilings (cuBLAS matmul rates, device copy bandwidth) and the host's, for the roofline
# columns of mdl's op tables: each kernel's % of its bound and its headroom.
step roofline 60 $B/mdl-roofline --refresh --out "$LOG/roofline.json"
CEILINGS=()
[ -s "$LOG/roofline.json" ] && CEILINGS=(--ceilings "$LOG/roofline.json")
# Where one AMP step's time goes, op by op, in mdl and in PyTorch (the tables are in the logs).
for model in gpt resnet18; do
  step "profile-mdl-$model" 40 $B/mdl-profile-step --model $model --amp --device cuda "${CEILINGS[@]}"
  [ $TORCH = 1 ] && [ "${TORCH_PROFILES:-1}" = 1 ] &&
    step "profile-torch-$model" 40 python3 bench/torch_gpu_step.py --profile $model --amp
done

echo
echo "================ gpu-check on $(head -n 1 "$LOG/device.log") ================"
printf '%-24s %-14s %s\n' step result detail
for i in "${!STEPS[@]}"; do printf '%-24s %-14s %s\n' "${STEPS[$i]}" "${RESULTS[$i]}" "${DETAILS[$i]}"; done
if [ -s "$LOG/bench_cuda.json" ]; then
  echo
  python3 - "$LOG/bench_cuda.json" "$LOG/torch.log" <<'PY' || echo "(benchmark table: python3 could not read the JSON)"
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
errors = [r for r in runs if r.get("error_occurred")]
runs = [r for r in runs if not r.get("error_occurred")]
by = {r["name"]: r for r in runs}
# The counters are already in their units (bench_cuda divides by 1e12 / 1e9 before the rate).
# Kernel rows (/manual_time) time the GPU with CUDA events over a batch of back-to-back calls: their
# time (and rate) is the GPU's per call, with the host's wall time per call over the same batches
# beside it (wall_us). The other rows (/real_time, training steps and host-bound pairs) are wall time.
def wall(r):
    return f'{r["wall_us"]:.2f} us' if "wall_us" in r else ""
print(f'{"benchmark":66s} {"time":>15s} {"clock":5s} {"wall":>12s} {"figure":>20s}')
for r in runs:
    fig = next((f'{r[k]:.2f} {k}' for k in ("TFLOP/s", "GB/s", "images/s", "tokens/s", "wait_%") if k in r), "")
    clock = "gpu" if r["name"].endswith("/manual_time") else "wall"
    print(f'{r["name"]:66s} {r["real_time"]:12.2f} {r.get("time_unit", ""):2s} {clock:5s} {wall(r):>12s} {fig:>20s}')
def ratio(a, b, what, key="real_time"):
    ra, rb = by.get(a), by.get(b)
    if ra and rb: print(f"{what:60s} {rb[key]/ra[key]:6.2f}x")
for r in errors: print(f'{r["name"]:40s} ERROR: {r.get("error_message", "")[:120]}')
print()
ratio("BM_add_contiguous_vec16/manual_time", "BM_add_strided/manual_time", "elementwise: vectorised contiguous vs strided (speedup)")
for name, what in (("BM_copy_heads_split_f16", "copy (32, 256, 6, 64) -> (32, 6, 256, 64) f16"),
                   ("BM_bias_add_rows_f16", "bias add over rows (8192, 4096) f16"),
                   ("BM_mul_scalar_f16_16M", "f16 tensor times a number, 16M elements"),
                   ("BM_add_f32_f16_16M", "f32 + f16, 16M elements")):
    r = by.get(f"{name}/manual_time")
    if r and "GB/s" in r:
        print(f'{what}: {r["GB/s"]:.0f} GB/s, {r["real_time"]:.1f} us GPU')
ratio("BM_h2d_pinned/real_time", "BM_h2d_pageable/real_time", "host->device copy: pinned vs pageable (speedup)")
ratio("cuda_caching_allocator/on/alloc_4MiB", "cuda_caching_allocator/off/alloc_4MiB", "allocation: caching allocator vs cudaMalloc (speedup)")
ratio("cuda_graphs/on/op_chain/real_time", "cuda_graphs/off/op_chain/real_time", "30 small ops: CUDA Graph replay vs eager (speedup)")
ratio("fused_linear_act/on/f16/relu/manual_time", "fused_linear_act/off/f16/relu/manual_time", "linear+bias+relu: cuBLASLt epilogue vs separate kernels (speedup)")
ratio("fused_linear_act/on/f16/gelu/manual_time", "fused_linear_act/off/f16/gelu/manual_time", "linear+bias+gelu: cuBLASLt epilogue vs separate kernels (speedup)")
ratio("cudnn_benchmark/on/conv3x3_c64_32x32_b128_f16/manual_time", "cudnn_benchmark/off/conv3x3_c64_32x32_b128_f16/manual_time",
      "conv 3x3 f16 fwd+bwd: measured vs heuristic cuDNN algorithms (speedup)")
ratio("cudnn_benchmark/on/resnet18_step_amp/real_time", "cudnn_benchmark/off/resnet18_step_amp/real_time",
      "ResNet-18 AMP step: measured vs heuristic cuDNN algorithms (speedup)")
ratio("channels_last/on/conv3x3_c64_32x32_b128_f16/manual_time", "channels_last/off/conv3x3_c64_32x32_b128_f16/manual_time",
      "conv 3x3 f16 fwd+bwd: NHWC vs NCHW (speedup)")
ratio("multi_tensor_step/on/resnet18_step_amp/real_time", "multi_tensor_step/off/resnet18_step_amp/real_time",
      "ResNet-18 AMP step: multi-tensor optimizer step vs one launch per parameter (speedup)")
ratio("fused_add_relu/on/resnet18_step_amp/real_time", "fused_add_relu/off/resnet18_step_amp/real_time",
      "ResNet-18 AMP step: add_relu vs add then relu (speedup)")
ratio("fused_bn_relu/on/bn_relu_f16_128x64x32x32/manual_time", "fused_bn_relu/off/bn_relu_f16_128x64x32x32/manual_time",
      "batch norm + relu (128, 64, 32, 32) f16 fwd+bwd: folded vs separate (speedup)")
ratio("fused_bn_add_relu/on/bn_add_relu_f16_128x64x32x32/manual_time",
      "fused_bn_add_relu/off/bn_add_relu_f16_128x64x32x32/manual_time",
      "relu(batch norm + residual) (128, 64, 32, 32) f16 fwd+bwd: folded vs batch norm then add_relu (speedup)")
for case, what in (("f16", "f16"), ("bf16", "bf16"), ("f16_nhwc", "f16 channels-last")):
    ratio(f"batch_norm_packed_stats/on/bn_{case}_128x64x32x32/manual_time",
          f"batch_norm_packed_stats/off/bn_{case}_128x64x32x32/manual_time",
          f"batch norm (128, 64, 32, 32) {what} fwd+bwd: statistics packed vs not (speedup)")
ratio("cudnn_nondeterministic/on/conv3x3_c64_32x32_b128_f16/manual_time",
      "cudnn_nondeterministic/off/conv3x3_c64_32x32_b128_f16/manual_time",
      "conv 3x3 f16 fwd+bwd: any cuDNN algorithm vs deterministic only (speedup)")
ratio("cudnn_nondeterministic/on/resnet18_step_amp/real_time", "cudnn_nondeterministic/off/resnet18_step_amp/real_time",
      "ResNet-18 AMP step: any cuDNN algorithm vs deterministic only (speedup)")
for side in ("off", "on"):
    r = by.get(f"multi_tensor_step/{side}/resnet18_step_amp/real_time")
    if r and "kernels/step" in r: print(f'{"multi_tensor_step/" + side + ": kernel calls per ResNet-18 AMP step":60s} {r["kernels/step"]:6.0f}')
ratio("channels_last/on/resnet18_step_amp/real_time", "channels_last/off/resnet18_step_amp/real_time",
      "ResNet-18 AMP step: channels-last vs NCHW (speedup)")
ratio("packed_attention/on/gpt_step_amp/real_time", "packed_attention/off/gpt_step_amp/real_time",
      "GPT AMP step: heads read and written in place vs transposed around the kernel (speedup)")
ratio("amp_f32_grads/on/gpt_step_amp/real_time", "amp_f32_grads/off/gpt_step_amp/real_time",
      "GPT AMP step: linear's f32 gradients from the GEMMs vs rounded and converted (speedup)")
ratio("amp_weight_cache/on/gpt_step_amp/real_time", "amp_weight_cache/off/gpt_step_amp/real_time",
      "GPT AMP step: weight copies rewritten by the step vs cast by every forward (speedup)")
ratio("linear_bias_epilogue/on/gpt_step_amp/real_time", "linear_bias_epilogue/off/gpt_step_amp/real_time",
      "GPT AMP step: linear biases in the cuBLASLt epilogue vs a separate add (speedup)")
for toggle in ("packed_attention", "amp_weight_cache", "linear_bias_epilogue"):
    for side in ("off", "on"):
        r = by.get(f"{toggle}/{side}/gpt_step_amp/real_time")
        if r and "kernels/step" in r: print(f'{toggle + "/" + side + ": kernel calls per GPT AMP step":60s} {r["kernels/step"]:6.0f}')
ratio("allow_tf32/on/gemm/4096/manual_time", "allow_tf32/off/gemm/4096/manual_time", "f32 GEMM 4096: TF32 vs full f32 (speedup)")
ratio("cudnn_allow_tf32/on/conv3x3_c64_32x32_b128_f32/manual_time", "cudnn_allow_tf32/off/conv3x3_c64_32x32_b128_f32/manual_time",
      "conv 3x3 f32 fwd+bwd: TF32 vs full f32 (speedup)")
ratio("loader_side_stream/on/epoch/iterations:3/real_time", "loader_side_stream/off/epoch/iterations:3/real_time",
      "DataLoader epoch: side-stream copy vs copy on mdl's stream (speedup)")
for side in ("off", "on"):
    r = by.get(f"loader_side_stream/{side}/epoch/iterations:3/real_time")
    if r and "wait_%" in r: print(f'{"loader_side_stream/" + side + ": waiting for data":60s} {r["wait_%"]:6.1f} % of the epoch')
# PyTorch's lines: ms per training step, or TFLOP/s for its (cuBLAS) f16 GEMMs.
sys.path.insert(0, "bench")
import gpu_goals
torch_ms = gpu_goals.torch_figures(sys.argv[2])
f16 = [r for r in runs if r["name"].startswith("BM_gemm_f16/")]
if f16:
    peak = max(r["TFLOP/s"] for r in f16)
    for r in f16:
        n = r["name"].split("/")[1]
        cublas = torch_ms.get(f"gemm_f16_{n}")
        vs = f", {100*r['TFLOP/s']/cublas:5.1f}% of cuBLAS via PyTorch ({cublas:.1f})" if cublas else ""
        print(f'f16 GEMM {r["name"]:32s} {r["TFLOP/s"]:7.1f} TFLOP/s = {100*r["TFLOP/s"]/peak:5.1f}% of the best size{vs}')
for dt in ("f16", "f32"):
    for part in ("fwd", "fwd_bwd"):
        case = f"{dt}/causal_b32_h6_t256_d64/{part}/manual_time"
        ratio(f"flash_attention/on/{case}", f"flash_attention/off/{case}", f"attention {dt} {part}: flash vs plain kernel (speedup)")
        r, t = by.get(f"flash_attention/on/{case}"), torch_ms.get(f"sdpa_{dt}_causal_b32_h6_t256_d64_{part}")
        if r and t:  # bench_cuda's times are in us, the script's in ms (wall, synchronised per call)
            w = f', wall {r["wall_us"] / 1e3:.3f} ms (/ PyTorch {r["wall_us"] / 1e3 / t:.2f})' if "wall_us" in r else ""
            print(f'attention {dt} {part}: flash GPU {r["real_time"] / 1e3:.3f} ms{w}, PyTorch SDPA {t:.3f} ms, '
                  f'mdl GPU time / PyTorch time {r["real_time"] / 1e3 / t:.2f}')
# The register-tiled kernels against the ones they replace and against PyTorch's SDPA; beside them
# cuDNN's fused attention (bench/cudnn_sdpa.h) on the same inputs, the yardstick where it has rows (a
# cuDNN that cannot run a graph shows as an ERROR row).
for switch, kernel, versus, goal, rows in (
        ("flash_attention_mma", "mma.sync", "mma.sync registers vs WMMA", "fwd <= 1.2, fwd_bwd <= 1.0",
         (("f16", "fwd"), ("bf16", "fwd"), ("f16", "fwd_bwd"))),
        ("flash_attention_tf32x3", "3xTF32", "3xTF32 tensor cores vs FMA", "<= 1.0", (("f32", "fwd"), ("f32", "fwd_bwd")))):
    for dt, part in rows:
        case = f"{dt}/causal_b32_h6_t256_d64/{part}/manual_time"
        ratio(f"{switch}/on/{case}", f"{switch}/off/{case}", f"attention {dt} {part}: {versus} (speedup)")
        r, t = by.get(f"{switch}/on/{case}"), torch_ms.get(f"sdpa_{dt}_causal_b32_h6_t256_d64_{part}")
        if r and t:
            print(f'attention {dt} {part}: {kernel} GPU {r["real_time"] / 1e3:.3f} ms, PyTorch SDPA {t:.3f} ms, '
                  f'mdl GPU time / PyTorch time {r["real_time"] / 1e3 / t:.2f} (goal: {goal})')
        c = by.get(f"cudnn_sdpa/{case}")
        if r and c:
            vs = f', PyTorch SDPA {t:.3f} ms, cuDNN / PyTorch {c["real_time"] / 1e3 / t:.2f}' if t else ""
            print(f'attention {dt} {part}: mdl GPU {r["real_time"] / 1e3:.3f} ms, cuDNN SDPA {c["real_time"] / 1e3:.3f} ms{vs}, '
                  f'mdl / cuDNN SDPA {r["real_time"] / c["real_time"]:.2f}')
r, t = by.get("BM_batch_norm_f16/manual_time"), torch_ms.get("batch_norm_f16")
if r:
    vs = f', PyTorch {t:.1f} us, mdl GPU time / PyTorch time {r["real_time"] / t:.2f}' if t else ""
    w = f' (wall {r["wall_us"]:.1f} us)' if "wall_us" in r else ""
    print(f'batch norm f16 forward + backward (128, 64, 32, 32): mdl GPU {r["real_time"]:.1f} us{w}{vs}')
    add = by.get("BM_add_contiguous_vec16/manual_time")
    if "GB/s" in r and add and "GB/s" in add:  # the same card's elementwise rate as its bandwidth
        print(f'batch norm f16: {r["GB/s"]:.0f} GB/s over its 11 passes, the vectorised add {add["GB/s"]:.0f} GB/s: '
              f'{add["GB/s"] / r["GB/s"]:.2f}x of bandwidth (goal: <= 1.3)')
# Batch norm's kernels under Nsight Compute (the ncu-bn steps): per kernel, its launches, mean time,
# DRAM rate and share of the profiled time.
import collections, csv, os, re
for case, side in ((c, s) for c in ("f16", "f16_nhwc") for s in ("off", "on")):
    path = os.path.join(os.path.dirname(sys.argv[1]), f"ncu-bn-{case}-{side}.log")
    if not os.path.exists(path): continue
    table = list(csv.reader(l for l in open(path, errors="replace") if l.startswith('"')))
    h = {k: i for i, k in enumerate(table[0])} if table else {}
    if not all(k in h for k in ("ID", "Kernel Name", "Metric Name", "Metric Value")):
        print(f"batch norm {case} kernels ({side}): no Nsight Compute figures, see {path}")
        continue
    launches = collections.defaultdict(dict)
    for row in table[1:]:
        try:
            launches[(row[h["ID"]], row[h["Kernel Name"]])][row[h["Metric Name"]]] = float(row[h["Metric Value"]].replace(",", ""))
        except (IndexError, ValueError):
            pass
    kinds = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for (_, name), m in launches.items():
        k = kinds[re.sub(r"[<(].*", "", name.replace("(anonymous namespace)::", "")).split("::")[-1].split()[-1]]
        k[0] += 1
        k[1] += m.get("gpu__time_duration.sum", 0.0)
        k[2] += m.get("dram__bytes_read.sum", 0.0) + m.get("dram__bytes_write.sum", 0.0)
    total = sum(k[1] for k in kinds.values()) or 1.0
    print(f"batch norm {case.replace('_nhwc', ' channels-last')} kernels under Nsight Compute, statistics "
          f"{'packed' if side == 'on' else 'not packed'} ({len(launches)} launches):")
    for name, (n, ns, b) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name[:44]:44s} {n:3d} x {ns / n / 1e3:8.2f} us {b / ns if ns else 0.0:8.0f} GB/s {100 * ns / total:5.1f}% of the time")
# The host's cost per launch: the 30-op chain eager in mdl and in PyTorch (both synchronised per chain).
r, t = by.get("cuda_graphs/off/op_chain/real_time"), torch_ms.get("op_chain")
if r and t:
    print(f'30 small ops eager: mdl {r["real_time"]:.1f} us ({r["real_time"] / 30:.2f} us a launch), '
          f'PyTorch {t:.1f} us ({t / 30:.2f}), mdl / PyTorch {r["real_time"] / t:.2f}')
# Training steps: mdl f32 vs autocast f16, and PyTorch's time for the same step. mdl's host ms is
# how long its step took to return, every launch queued: near mdl's ms, the step waits on the host.
def host(r):
    return f'{r["host_ms/step"]:12.2f}' if "host_ms/step" in r else f'{"":12s}'
print()
print(f'{"training step":28s} {"mdl ms":>9s} {"mdl host ms":>12s} {"PyTorch ms":>11s} {"mdl speed vs PyTorch":>21s}')
for model in ("simplecnn", "resnet18", "gpt"):
    for mode in ("f32", "amp"):
        key = f"{model}_step_{mode}"
        r = by.get(f"BM_{key}/real_time")
        if not r: continue
        ms = r["real_time"] if r.get("time_unit") == "ms" else r["real_time"] / 1e3
        t = torch_ms.get(key)
        print(f'{key:28s} {ms:9.2f} {host(r)} {t if t else float("nan"):11.2f} {t / ms if t else float("nan"):20.2f}x')
    ratio(f"BM_{model}_step_amp/real_time", f"BM_{model}_step_f32/real_time", f"{model}: autocast f16 vs f32 step (speedup)")
    for mode in ("f32", "amp"):
        ratio(f"BM_{model}_step_{mode}_graph/real_time", f"BM_{model}_step_{mode}/real_time", f"{model}: {mode} step as a CUDA Graph vs eager (speedup)")
        if by.get(f"BM_{model}_step_{mode}_graph/real_time") is None:
            print(f"{model}: the {mode} CUDA Graph step did not run (see bench_cuda's log for the error)")
r, t = by.get("channels_last/on/resnet18_step_amp/real_time"), torch_ms.get("resnet18_step_amp_channels_last")
if r and t:
    print(f'{"resnet18_step_amp_channels_last":28s} {r["real_time"]:9.2f} {host(r)} {t:11.2f} {t / r["real_time"]:20.2f}x')
r, t = by.get("flash_attention_tf32x3/on/gpt_step_f32/real_time"), torch_ms.get("gpt_step_f32")
if r and t:
    print(f'{"gpt_step_f32_3xtf32_attention":28s} {r["real_time"]:9.2f} {host(r)} {t:11.2f} {t / r["real_time"]:20.2f}x')
ratio("flash_attention_tf32x3/on/gpt_step_f32/real_time", "flash_attention_tf32x3/off/gpt_step_f32/real_time",
      "GPT f32 step: 3xTF32 attention vs FMA attention (speedup)")
# Every step row's wall time beside its host time: a share near 100% is a step bound by its launches.
steps = [r for r in runs if "host_ms/step" in r and r.get("time_unit") == "ms"]
if steps:
    print()
    print(f'{"step row":66s} {"wall ms":>9s} {"host ms":>9s} {"host share":>11s}')
    for r in steps:
        print(f'{r["name"]:66s} {r["real_time"]:9.2f} {r["host_ms/step"]:9.2f} {100 * r["host_ms/step"] / r["real_time"]:10.0f}%')
PY
fi
# The card's rows for bench/RESULTS.md: LOG/results/summary.json, which `python3 bench/results.py
# record LOG/results` keeps as the card's table (the profiles' kernels and the ceilings with it).
if [ -s "$LOG/bench_cuda.json" ] && [ -f bench/summary.py ]; then
  mkdir -p "$LOG/results"
  cp "$LOG/bench_cuda.json" "$LOG/results/"
  PROFILES=()
  for model in resnet18 gpt; do
    [ -s "$LOG/profile-mdl-$model.log" ] && PROFILES+=(--profile "$LOG/profile-mdl-$model.log")
  done
  COMMIT=$( (cat COMMIT 2>/dev/null || git describe --always --dirty 2>/dev/null) | head -n 1)
  python3 bench/summary.py "$LOG/results" --gpu "$(head -n 1 "$LOG/device.log" | cut -d, -f1)" \
    --ceilings "$LOG/roofline.json" --commit "${COMMIT:-unknown}" \
    --command "gpu_check.sh, bench_cuda --benchmark_min_time=0.3 (one run per benchmark)" "${PROFILES[@]}" \
    --torch "$LOG/torch.log" >"$LOG/summary.log" 2>&1 &&
    echo "card summary: $LOG/results/summary.json (bench/results.py record it)" &&
    python3 -c 'import json, sys; sys.path.insert(0, "bench"); import gpu_goals
print("\n".join(gpu_goals.goal_lines(json.load(open(sys.argv[1])).get("goals", []))))' "$LOG/results/summary.json"
fi
{
  cat "$LOG/console.log"
  for name in "${STEPS[@]}"; do
    echo
    echo "================ $name ($LOG/$name.log)"
    cat "$LOG/$name.log"
  done
} >"$LOG/gpu-check.log"
echo "logs: $LOG (all of them in $LOG/gpu-check.log)"
exit $failed
