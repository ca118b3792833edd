#!/bin/sh
# Installs the library into a temporary prefix, builds examples/own_cnn.cpp against it with
# pkg-config alone, as a user's program would be, and runs it at a tiny size.
# Usage: tests/check_install.sh [make arguments, e.g. CUDA=0]
set -eu
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
${MAKE:-make} -s install PREFIX="$work/prefix" "$@"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
cd "$work"
${CXX:-g++} "$root/examples/own_cnn.cpp" $(pkg-config --cflags --libs mdl) -o own_cnn
./own_cnn 1 128 > own_cnn.out
grep -Eq '^1 epochs; best val loss [0-9.]+ at epoch 1' own_cnn.out || { cat own_cnn.out; exit 1; }
echo "install check: a program built with pkg-config --cflags --libs mdl trains"
