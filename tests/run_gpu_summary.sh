#!/usr/bin/env bash
# A GPU lease's record without a GPU: bench/summary.py --gpu on a made-up bench_cuda.json and
# PyTorch's lines, as gpu_check.sh calls it. The goals (bench/gpu_goals.py) must come out with the
# figures the inputs give, met or missed, and bench/results.py must print them under the card.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
fail() { echo "run_gpu_summary: $*" >&2; exit 1; }

mkdir -p "$DIR/results"
python3 - "$DIR/results/bench_cuda.json" <<'PY'
import json, sys
def run(name, t, unit, **counters):
    return {"name": name, "run_type": "iteration", "real_time": t, "time_unit": unit, **counters}
benchmarks = [
    run("flash_attention_mma/on/f16/causal_b32_h6_t256_d64/fwd/manual_time", 34.9, "us"),
    run("flash_attention_mma/on/f16/causal_b32_h6_t256_d64/fwd_bwd/manual_time", 400.0, "us"),
    run("BM_gpt_step_f32/real_time", 20.83, "ms", **{"host_ms/step": 5.1}),
    run("BM_gpt_step_amp/real_time", 7.07, "ms", **{"copies/step": 33.0}),
    run("BM_resnet18_step_f32/real_time", 13.70, "ms"),
    run("BM_resnet18_step_amp/real_time", 10.04, "ms", **{"host_ms/step": 9.8}),
    run("channels_last/on/resnet18_step_amp/real_time", 5.50, "ms"),
    run("BM_batch_norm_f16/manual_time", 72.2, "us", **{"GB/s": 2556.0}),
    run("BM_add_contiguous_vec16/manual_time", 100.0, "us", **{"GB/s": 4311.0}),
]
json.dump({"context": {"date": "2026-12-04T18:21:30+00:00", "num_cpus": 16}, "benchmarks": benchmarks},
          open(sys.argv[1], "w"))
PY
cat >"$DIR/torch.log" <<'EOF'
PyTorch 2.11.0 on NVIDIA H200 (cudnn.benchmark on, TF32 off)
torch_gpt_step_f32                      19.830 ms/step       413000 tokens/s
torch_gpt_step_amp                      14.790 ms/step       553000 tokens/s
torch_resnet18_step_f32                 16.010 ms/step         7995 images/s
torch_resnet18_step_amp                 11.740 ms/step        10900 images/s
torch_resnet18_step_amp_channels_last    9.020 ms/step        14190 images/s
torch_batch_norm_f16                   336.7 us
torch_sdpa_f16_causal_b32_h6_t256_d64_fwd      0.036 ms/call
torch_sdpa_f16_causal_b32_h6_t256_d64_fwd_bwd      0.351 ms/call
EOF
python3 "$ROOT/bench/summary.py" "$DIR/results" --gpu "NVIDIA H200" --commit abc1234 --command "gpu_check.sh" \
  --torch "$DIR/torch.log" >"$DIR/summary.log" 2>&1 || { cat "$DIR/summary.log"; fail "summary.py --gpu failed"; }

python3 - "$DIR/results/summary.json" "$ROOT/bench" <<'PY' || exit 1
import json, sys
sys.path.insert(0, sys.argv[2])
import gpu_goals, results
doc = json.load(open(sys.argv[1]))
goals = {g["goal"].split(":")[0]: g for g in doc.get("goals", [])}
want = {  # goal: (figure, met)
    "causal attention B32 H6 T256 D64 f16, forward": (34.9 / 36.0, True),
    "causal attention B32 H6 T256 D64 f16, forward + backward": (400.0 / 351.0, False),
    "GPT 6x384 b32 step f32": (19.83 / 20.83, False),
    "GPT step AMP": (14.79 / 7.07, True),
    "ResNet-18 b128 step f32": (16.01 / 13.70, True),
    "ResNet-18 step AMP, NCHW": (11.74 / 10.04, False),
    "ResNet-18 step AMP, channels-last on both": (9.02 / 5.50, True),
    "ResNet-18 AMP over f32, NCHW": (13.70 / 10.04, False),
    "ResNet-18 AMP over f32, channels-last": (13.70 / 5.50, True),
    "batch norm (128, 64, 32, 32) f16 fwd + bwd": (4311.0 / 2556.0, False),
    "GPT AMP copy kernels per step": (33.0, True),
}
bad = []
for goal, (figure, met) in want.items():
    g = goals.get(goal)
    if g is None:
        bad.append(f"missing goal: {goal}")
    elif abs(g["ratio"] - figure) > 2e-3 or g["met"] != met:
        bad.append(f"{goal}: figure {g['ratio']} met {g['met']}, expected {figure:.3f} met {met}")
extra = set(goals) - set(want)
if extra:  # rows whose benchmarks did not run must not appear (the 3xTF32 step, the packed batch norm)
    bad.append(f"goals without their figures: {sorted(extra)}")
if "host 9.80 ms" not in goals["ResNet-18 step AMP, NCHW"]["mdl"]:
    bad.append("the NCHW AMP step's goal does not name its host time")
doc.setdefault("recorded", "?")
text = results.table(doc)
for line in ("| ResNet-18 step AMP, NCHW: speed over PyTorch's | 10.04 ms, host 9.80 ms | 11.74 ms | 1.17 | >= 1.3 | missed |",
             "| GPT AMP copy kernels per step | 33 | - | 33.00 | <= 60 | met |"):
    if line not in text:
        bad.append(f"results.py's table lacks: {line}")
if bad:
    sys.exit("run_gpu_summary: " + "\n  ".join(bad))
print(f"run_gpu_summary: {len(goals)} goals from the made-up lease, each with its figure, and in the card's table")
PY
