#!/usr/bin/env bash
# make gpu-bundle: everything `make gpu-check` needs on a bare GPU machine (no compiler run, no
# doctest, stb, Google Benchmark or network there), built here and packed into one file:
#   build/gpu-bundle/mdl-gpu.tar.xz, holding mdl-gpu/
#     bin/   mdl_tests, bench_cuda, mdl-train, mdl-profile-step, mdl-study (CUDA=1, MPI off, sm_90,
#            stripped)
#     lib/   libbenchmark (Debian's; the GPU machine has none)
#     bench/ the PyTorch comparison scripts
#     data/fashion-mnist/  Fashion-MNIST's four IDX files (30 MB, already compressed), for the study
#     cpu-study/summary.csv  this machine's `make study` summary, when reports/ has one: the study's
#            CPU half, which the GPU half sets beside its own
#     COMMIT, gpu_check.sh, gpu_study.sh, gpu_libs.sh
# On the GPU machine: tar xf mdl-gpu.tar.xz && mdl-gpu/gpu_check.sh [LOG_DIR]; mdl-gpu/gpu_study.sh
# (at most 8 minutes; --dry-run lists its runs and their estimated time).
# The whole file must stay under 60 MB: a GPU machine is sent at most 64 MiB.
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
  "$B/mdl-study"

rm -rf "$STAGE"
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/bench" "$STAGE/data/fashion-mnist"
for f in mdl_tests bench/bench_cuda mdl-train mdl-profile-step mdl-study; do
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
cp bench/torch_gpu_step.py bench/torch_gpt.py bench/torch_study.py "$STAGE/bench/"
cp tools/gpu_check.sh tools/gpu_study.sh tools/gpu_libs.sh "$STAGE/"
FASHION_MNIST=${STUDY_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  cp "$FASHION_MNIST/$f.gz" "$STAGE/data/fashion-mnist/"
done
COMMIT=$(git describe --always --dirty 2>/dev/null || echo unknown)
echo "$COMMIT" >"$STAGE/COMMIT"
CPU_SUMMARY=reports/study/summary.csv
if [ -f "$CPU_SUMMARY" ]; then
  mkdir -p "$STAGE/cpu-study"
  cp "$CPU_SUMMARY" "$STAGE/cpu-study/"
  # Its commit column: the study's CPU half should come from the commit the GPU half runs.
  their=$(awk -F, 'NR == 2 { print $3 }' "$CPU_SUMMARY")
  [ "$their" = "$COMMIT" ] || echo "== note: $CPU_SUMMARY is from commit '$their', the bundle from $COMMIT"
else
  echo "== note: no $CPU_SUMMARY (make study): the GPU study will have no CPU half beside it"
fi
# The data files are compressed already: xz gains nothing on them, and they are stored as they are.
tar -C "$OUT" -cf - mdl-gpu | xz -T0 -6 >"$OUT/mdl-gpu.tar.xz"
size=$(stat -c %s "$OUT/mdl-gpu.tar.xz")
echo "== $OUT/mdl-gpu.tar.xz: $((size / 1000000)) MB (lib/: $(ls "$STAGE/lib" | tr '\n' ' '))"
if [ "$size" -ge 60000000 ]; then
  echo "gpu_bundle.sh: the bundle is $size bytes, over the 60 MB a GPU machine can be sent" >&2
  exit 1
fi
echo "On the GPU machine: tar xf mdl-gpu.tar.xz && mdl-gpu/gpu_check.sh [LOG_DIR]; mdl-gpu/gpu_study.sh"
