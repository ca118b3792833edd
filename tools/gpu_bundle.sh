#!/usr/bin/env bash
# make gpu-bundle: everything `make gpu-check` and the study's GPU half need on a bare GPU machine
# (no compiler run, no doctest, stb, Google Benchmark or network there), built here and packed:
#   build/gpu-bundle/mdl-gpu.tar.xz (under 20 MB), holding mdl-gpu/
#     bin/   mdl_tests, bench_cuda, mdl-train, mdl-profile-step, mdl-study, mdl-roofline (CUDA=1,
#            MPI off, sm_90, stripped)
#     lib/   libbenchmark (Debian's; the GPU machine has none)
#     bench/ the PyTorch comparison scripts, and summary.py (the run's rows for bench/results.py record)
#     gpu-study/summary.csv  the last GPU study's rows (bench/results/study/gpu-summary.csv), whose
#            measured epochs plan the next one (gpu_study.sh --estimate-from)
#     cpu-study/summary.csv  the study's CPU half, which the GPU half sets beside its own: this
#            checkout's reports/study/summary.csv (gpu_study.sh --device cpu), or else
#            bench/results/study/cpu-summary.csv
#     COMMIT, gpu_check.sh, gpu_study.sh, gpu_libs.sh
#   build/gpu-bundle/mdl-gpu-data.tar (30 MB): mdl-gpu/data/fashion-mnist/, Fashion-MNIST's four
#     IDX files as Debian ships them (compressed already), for gpu_study.sh alone
# Both together stay under 60 MB: a GPU machine is sent at most 64 MiB.
# On the GPU machine: tar xf mdl-gpu.tar.xz && mdl-gpu/gpu_check.sh [LOG_DIR]; for the study also
# tar xf mdl-gpu-data.tar, then mdl-gpu/gpu_study.sh (at most 8 minutes; --dry-run lists its runs).
# MDL_CUDA_ARCH (90) may name other architectures; the build folder is build/gpu-bundle/build.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
ARCH=${MDL_CUDA_ARCH:-90}
OUT=build/gpu-bundle
B=$OUT/build
STAGE=$OUT/mdl-gpu
SWITCHES=(CUDA=1 MPI=0 "MDL_CUDA_ARCH=$ARCH" "BUILD=$B")

echo "== building (${SWITCHES[*]})"
$MAKE -j"$(nproc)" "${SWITCHES[@]}" "$B/mdl_tests" "$B/bench/bench_cuda" "$B/mdl-train" "$B/mdl-profile-step" \
  "$B/mdl-study" "$B/mdl-roofline"

rm -rf "$STAGE"
DATA_STAGE=$OUT/data/mdl-gpu/data/fashion-mnist
rm -rf "$OUT/data"
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/bench" "$DATA_STAGE"
for f in mdl_tests bench/bench_cuda mdl-train mdl-profile-step mdl-study mdl-roofline; do
  strip -o "$STAGE/bin/$(basename "$f")" "$B/$f"
done
# Every shared library of the binaries that is neither the system's C/C++ runtime (glibc's parts
# among it: another glibc's must never be loaded) nor CUDA's own (the GPU machine has those)
# travels in lib/: today that is Google Benchmark alone.
ldd "$STAGE"/bin/* | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
  while read -r name path; do
    case "$name" in
      libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libutil.so* | libresolv.so* | ld-linux* | \
        linux-vdso* | libstdc++* | libgcc_s* | libgomp* | libz.so* | libcu* | libnccl* | libnvJitLink*) ;;
      *) cp -L "$path" "$STAGE/lib/$name" ;;
    esac
  done
cp bench/torch_gpu_step.py bench/torch_gpt.py bench/torch_models.py bench/torch_study.py bench/summary.py \
  bench/machine.py bench/gpu_goals.py "$STAGE/bench/"
cp tools/gpu_check.sh tools/gpu_study.sh tools/gpu_libs.sh "$STAGE/"
FASHION_MNIST=${STUDY_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  cp "$FASHION_MNIST/$f.gz" "$DATA_STAGE/"
done
COMMIT=$(git describe --always --dirty 2>/dev/null || echo unknown)
echo "$COMMIT" >"$STAGE/COMMIT"
# The last GPU study's summary, whose measured epochs gpu_study.sh plans the next one with.
if [ -f bench/results/study/gpu-summary.csv ]; then
  mkdir -p "$STAGE/gpu-study"
  cp bench/results/study/gpu-summary.csv "$STAGE/gpu-study/summary.csv"
fi
# The study's CPU half: this checkout's last run of it, or else the one committed.
CPU_SUMMARY=reports/study/summary.csv
[ -f "$CPU_SUMMARY" ] || CPU_SUMMARY=bench/results/study/cpu-summary.csv
if [ -f "$CPU_SUMMARY" ]; then
  mkdir -p "$STAGE/cpu-study"
  cp "$CPU_SUMMARY" "$STAGE/cpu-study/summary.csv"
  # Its commit column: the study's CPU half should come from the commit the GPU half runs.
  their=$(awk -F, 'NR == 2 { print $3 }' "$CPU_SUMMARY")
  [ "$their" = "$COMMIT" ] || echo "== note: $CPU_SUMMARY is from commit '$their', the bundle from $COMMIT"
else
  echo "== note: no study summary in reports/ or bench/results/study/: the GPU study will have no CPU half beside it"
fi
# The six binaries share most of their bytes (libmdl and its kernels, linked into each): xz -9's
# 64 MiB window finds the repeats across files, one thread keeps them in one block (23 MB at -6, 9 at -9).
tar -C "$OUT" -cf - mdl-gpu | xz -9 -T1 >"$OUT/mdl-gpu.tar.xz"
# The data files are compressed already: stored as they are.
tar -C "$OUT/data" -cf "$OUT/mdl-gpu-data.tar" mdl-gpu
code=$(stat -c %s "$OUT/mdl-gpu.tar.xz") data=$(stat -c %s "$OUT/mdl-gpu-data.tar")
echo "== $OUT/mdl-gpu.tar.xz: $((code / 1000000)) MB (lib/: $(ls "$STAGE/lib" | tr '\n' ' ')); $OUT/mdl-gpu-data.tar: $((data / 1000000)) MB"
if [ "$code" -ge 20000000 ] || [ $((code + data)) -ge 60000000 ]; then
  echo "gpu_bundle.sh: the bundle is $code bytes and its data $data: over 20 MB, or 60 MB together, the most a GPU machine is sent" >&2
  exit 1
fi
echo "On the GPU machine: tar xf mdl-gpu.tar.xz && mdl-gpu/gpu_check.sh [LOG_DIR]"
echo "  and for the study: tar xf mdl-gpu-data.tar && mdl-gpu/gpu_study.sh"
