#!/usr/bin/env bash
# make gpu-bundle: everything `make gpu-check` needs on a bare GPU machine (no compiler run, no
# doctest, stb, Google Benchmark or network there), built here and packed into one file:
#   build/gpu-bundle/mdl-gpu.tar.xz, holding mdl-gpu/
#     bin/   mdl_tests, bench_cuda, mdl-train, mdl-profile-step (CUDA=1, MPI off, sm_90, stripped)
#     lib/   libbenchmark (Debian's; the GPU machine has none)
#     bench/ the PyTorch comparison scripts
#     gpu_check.sh
# On the GPU machine: tar xf mdl-gpu.tar.xz && mdl-gpu/gpu_check.sh [LOG_DIR]
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
$MAKE -j"$(nproc)" "${SWITCHES[@]}" "$B/mdl_tests" "$B/bench/bench_cuda" "$B/mdl-train" "$B/mdl-profile-step"

rm -rf "$STAGE"
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/bench"
for f in mdl_tests bench/bench_cuda mdl-train mdl-profile-step; do
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
cp bench/torch_gpu_step.py bench/torch_gpt.py "$STAGE/bench/"
cp tools/gpu_check.sh "$STAGE/"
tar -C "$OUT" -cJf "$OUT/mdl-gpu.tar.xz" mdl-gpu
echo "== $OUT/mdl-gpu.tar.xz: $(du -h "$OUT/mdl-gpu.tar.xz" | cut -f1) (lib/: $(ls "$STAGE/lib" | tr '\n' ' '))"
echo "On the GPU machine: tar xf mdl-gpu.tar.xz && mdl-gpu/gpu_check.sh [LOG_DIR]"
