#!/usr/bin/env bash
# gpu_study.sh: mdl-study's GPU half in one call (at most 8 minutes), then PyTorch on the same
# batches, into OUT/study-gpu.md, its charts (OUT/study/) and OUT/study/summary.csv, all of them in
# OUT/study-gpu.tgz (a few hundred kB: what a GPU machine sends back).
#   Rows, each against the f32 baseline of the same seed: AMP f16, AMP bf16, channels-last, CUDA
#   Graph replay, mdl-train's GPU loader (threads + prefetch + pinned memory), gradient
#   accumulation (its memory) and all together, for SimpleCNN, ResNet-18 and a ViT on Fashion-MNIST
#   in memory; the loader, the memory and file caches, AMP and all together for SimpleCNN on the
#   same images decoded from PNG files and augmented each epoch (the input-bound case).
#   Measures: time to the target accuracy (90%, the ViT 85%, the decoded set 85%), s/epoch, data
#   wait, peak memory: median and range over the seeds, run seed by seed under one deadline, so a
#   call that runs out of time has fewer seeds everywhere and says so.
#   The last table sets the GPU beside the CPU half: the same plan run with --device cpu on the
#   machine the bundle was built on (cpu-study/summary.csv in the bundle, or --compare), named with
#   its CPU and commit.
#   bench/torch_study.py then trains PyTorch's SimpleCNN and ResNet-18 on mdl's sample orders for
#   the baseline, AMP and channels-last rows, and says per row whether mdl's gain is PyTorch's.
# Usage: gpu_study.sh [--dry-run] [--seeds N] [--budget S] [--out DIR] [--device cuda|cpu]
#          [--models LIST] [--decoded-models LIST] [--epochs N] [--subset N] [--no-torch]
#          [--estimate-from SUMMARY.csv] [--compare SUMMARY.csv]
# --estimate-from defaults, on a GPU, to the last GPU study's summary (the bundle's gpu-study/, or
# bench/results/study/gpu-summary.csv in a checkout).
# --dry-run prints the runs, their estimated time and the budget's split, and runs nothing (no GPU
# needed). --device cpu runs the same plan on the CPU (tests/run_study.sh does, at a tiny size).
# From the bundle (make gpu-bundle): tar xf mdl-gpu.tar.xz && tar xf mdl-gpu-data.tar &&
# mdl-gpu/gpu_study.sh; in a checkout it
# uses build/latest/mdl-study (or $MDL_STUDY) and Debian's Fashion-MNIST.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -x "$HERE/bin/mdl-study" ]; then
  ROOT=$HERE STUDY=$HERE/bin/mdl-study DATA=$HERE/data/fashion-mnist COMPARE=$HERE/cpu-study/summary.csv
  LAST_GPU=$HERE/gpu-study/summary.csv
  COMMIT=$(cat "$HERE/COMMIT" 2>/dev/null || echo unknown)
  . "$HERE/gpu_libs.sh"
  bundle_library_path "$HERE"
  [ -z "$MISSING_LIBS" ] || echo "gpu_study.sh: libraries not found: $MISSING_LIBS"
else
  ROOT=$(cd "$HERE/.." && pwd) STUDY=${MDL_STUDY:-$ROOT/build/latest/mdl-study}
  DATA=${STUDY_FASHION_MNIST:-/usr/share/datasets/fashion-mnist} COMPARE=$ROOT/reports/study/summary.csv
  LAST_GPU=$ROOT/bench/results/study/gpu-summary.csv
  COMMIT=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
fi

DRY=0 SEEDS=3 BUDGET=450 OUT=$PWD/reports DEVICE=cuda TORCH=1 EPOCHS=8 SUBSET=0 ESTIMATE=""
MODELS=cnn,resnet18,vit DECODED_MODELS=cnn
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --seeds) SEEDS=$2; shift ;;
    --budget) BUDGET=$2; shift ;;
    --out) OUT=$2; shift ;;
    --device) DEVICE=$2; shift ;;
    --models) MODELS=$2; shift ;;
    --decoded-models) DECODED_MODELS=$2; shift ;;
    --epochs) EPOCHS=$2; shift ;;
    --subset) SUBSET=$2; shift ;;
    --estimate-from) ESTIMATE=$2; shift ;;
    --compare) COMPARE=$2; shift ;;
    --no-torch) TORCH=0 ;;
    *) echo "gpu_study.sh: unknown option '$1' (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
  shift
done
for n in "$SEEDS" "$BUDGET" "$EPOCHS" "$SUBSET"; do
  case $n in '' | *[!0-9]*) echo "gpu_study.sh: '$n' is not a whole number" >&2; exit 2 ;; esac
done
[ -x "$STUDY" ] || { echo "gpu_study.sh: no mdl-study at $STUDY (make tools, or make gpu-bundle)" >&2; exit 2; }
[ -f "$DATA/train-images-idx3-ubyte.gz" ] ||
  { echo "gpu_study.sh: no Fashion-MNIST in $DATA (from the bundle: tar xf mdl-gpu-data.tar beside mdl-gpu.tar.xz)" >&2; exit 2; }
PYTHON=${PYTHON:-python3}
if [ $TORCH = 1 ] && ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  echo "gpu_study.sh: $PYTHON has no PyTorch: the PyTorch comparison is left out"
  TORCH=0
fi
# PyTorch's share of the budget: its rows are fewer; mdl's deadline is the rest less a margin for
# the report. A run never starts past its deadline, but one that started runs to its end: the
# margin is the longest run's time.
MDL_BUDGET=$((TORCH ? BUDGET * 70 / 100 : BUDGET - 20))
TORCH_MODELS=$(echo "$MODELS" | tr , '\n' | grep -xE 'cnn|resnet18' | paste -sd, || true)

export STUDY_DEVICES=$DEVICE STUDY_DATA=fashion-mnist,png STUDY_FASHION_MNIST=$DATA STUDY_OUT=$OUT
export STUDY_MODELS=$MODELS STUDY_DECODED_MODELS=$DECODED_MODELS STUDY_SEEDS=$SEEDS STUDY_EPOCHS=$EPOCHS
export STUDY_SUBSET=$SUBSET STUDY_STOP_AT_TARGET=1 STUDY_TARGET=90,vit=85 STUDY_DECODED_TARGET=85
export STUDY_ROWS=+loader,+amp,+amp-bf16,+channels-last,+amp+channels-last,+cuda-graph,+grad-accum,all
export STUDY_DECODED_ROWS=+loader,+cache-memory,+cache-file,+amp,all
export STUDY_DEADLINE=$MDL_BUDGET STUDY_DUMP_ORDER=1 STUDY_COMMIT=$COMMIT
# Without --estimate-from, the last GPU study's measured epochs plan this one (on a GPU).
[ -z "$ESTIMATE" ] && [ "$DEVICE" != cpu ] && [ -f "$LAST_GPU" ] && ESTIMATE=$LAST_GPU
[ -n "$ESTIMATE" ] && export STUDY_ESTIMATE_FROM=$ESTIMATE
[ -f "$COMPARE" ] && export STUDY_COMPARE=$COMPARE
if [ "$DEVICE" != cpu ] && command -v nvidia-smi >/dev/null; then
  index=${DEVICE#cuda}
  index=${index#:}  # cuda -> 0, cuda:N -> N
  STUDY_GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader -i "${index:-0}" 2>/dev/null | head -n 1 || true)
  export STUDY_GPU_NAME
fi

echo "gpu_study.sh: $DEVICE, $SEEDS seeds, at most $EPOCHS epochs of $([ "$SUBSET" = 0 ] && echo all 60,000 || echo "$SUBSET") samples, budget $BUDGET s" \
  "(mdl-study $MDL_BUDGET s, PyTorch the rest$([ $TORCH = 1 ] || echo ': not run')), commit $COMMIT"
echo "  CPU half beside it: $([ -f "$COMPARE" ] && echo "$COMPARE" || echo "none ($COMPARE missing: run make study there first)")"
if [ $DRY = 1 ]; then
  STUDY_DRY_RUN=1 "$STUDY"
  [ $TORCH = 1 ] && [ -n "$TORCH_MODELS" ] &&
    echo "PyTorch: $TORCH_MODELS x baseline, +amp, +amp-bf16, +channels-last, +amp+channels-last x $SEEDS seeds, within what is left of the budget"
  exit 0
fi

mkdir -p "$OUT"
start=$SECONDS
status=0
"$STUDY" || status=$?
md=$OUT/study-gpu.md
{
  echo "<!-- written by gpu_study.sh on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $COMMIT -->"
  cat "$OUT/study.md"
} >"$md"
rm -f "$OUT/study.md"
if [ $TORCH = 1 ] && [ -n "$TORCH_MODELS" ]; then
  left=$((BUDGET - (SECONDS - start) - 15))
  if [ $left -gt 10 ]; then
    "$PYTHON" "$ROOT/bench/torch_study.py" --device "${DEVICE%%:*}" --data "$DATA" --orders "$OUT/study/orders" \
      --models "$TORCH_MODELS" --seeds "$SEEDS" --epochs "$EPOCHS" --subset "$SUBSET" --target 90,vit=85 \
      --stop-at-target --deadline "$left" --out "$OUT/study/torch.csv" --mdl-summary "$OUT/study/summary.csv" \
      --report "$md" || status=$?
  else
    printf '\n## PyTorch beside mdl\n\nNot run: mdl-study left %s s of the %s s budget.\n' "$left" "$BUDGET" >>"$md"
  fi
fi
# The report with its charts and CSVs in one small archive to fetch (OUT also holds the PNG export and
# the sample orders, tens of MB, which stay behind).
packed="and $OUT/study-gpu.tgz"
tar -C "$OUT" -czf "$OUT/study-gpu.tgz" --exclude=orders study-gpu.md $([ -d "$OUT/study" ] && echo study) ||
  packed="(packing it failed)"
echo "gpu_study.sh: wrote $md $packed in $((SECONDS - start)) s (exit status $status)"
exit $status
