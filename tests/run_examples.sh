#!/bin/sh
# Runs each example program at a tiny size and checks its exit status and the lines it must
# print. Usage: tests/run_examples.sh BUILD/examples
set -eu
bin=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
failed=0

# expect NAME PATTERN COMMAND...: COMMAND exits 0 and prints a line matching PATTERN.
expect() {
  name=$1 pattern=$2
  shift 2
  if ! "$@" > "$name.out" 2>&1; then
    echo "FAIL $name: exit status $? from $*"; tail -n 20 "$name.out"; failed=1; return
  fi
  if ! grep -Eq "$pattern" "$name.out"; then
    echo "FAIL $name: no line matches '$pattern'"; tail -n 20 "$name.out"; failed=1; return
  fi
  echo "ok   $name"
}

expect own_cnn '^2 epochs; best val loss [0-9.]+ at epoch [12], saved to own_cnn.safetensors' \
  "$bin/own_cnn" 2 256
[ -s own_cnn.safetensors ] || { echo "FAIL own_cnn: own_cnn.safetensors was not written"; failed=1; }

i=0
while [ $i -lt 40 ]; do echo "the quick brown fox jumps over the lazy dog. "; i=$((i + 1)); done > text.txt
expect char_gpt '^loss per character [0-9.]+ \(uniform: 3\.3' "$bin/char_gpt" text.txt 1 256 16
grep -q '^---$' char_gpt.out || { echo "FAIL char_gpt: no generated text"; failed=1; }

expect hand_loop '^step   20/20: train loss [0-9.]+ \(' "$bin/hand_loop" 20 512
grep -q '^val loss [0-9.]' hand_loop.out || { echo "FAIL hand_loop: no validation loss"; failed=1; }

# A bad argument is an error message and status 1, not a crash.
if "$bin/char_gpt" missing.txt > missing.out 2>&1; then echo "FAIL char_gpt: a missing file exited 0"; failed=1
elif ! grep -q "missing.txt" missing.out; then echo "FAIL char_gpt: the error does not name the file"; failed=1
else echo "ok   char_gpt missing file"; fi

# refused NAME PATTERN COMMAND...: COMMAND exits with status 2 (a usage error) and prints a line matching PATTERN.
refused() {
  name=$1 pattern=$2
  shift 2
  status=0
  "$@" > "$name.out" 2>&1 || status=$?
  if [ $status -ne 2 ]; then echo "FAIL $name: exit status $status, not 2, from $*"; tail -n 5 "$name.out"; failed=1
  elif ! grep -Eq "$pattern" "$name.out"; then echo "FAIL $name: no line matches '$pattern'"; cat "$name.out"; failed=1
  else echo "ok   $name"; fi
}
refused char_gpt_no_epochs "^char_gpt: EPOCHS must be a whole number in \[1, " "$bin/char_gpt" text.txt 0 64 16
refused own_cnn_word "^own_cnn: EPOCHS must be a whole number in \[1, .*got 'two'" "$bin/own_cnn" two
refused own_cnn_trailing "^own_cnn: EPOCHS .*got '1x'" "$bin/own_cnn" 1x
refused own_cnn_negative "^own_cnn: SAMPLES must be a whole number in \[0, .*got '-5'" "$bin/own_cnn" 1 -5
refused hand_loop_extra "^hand_loop: too many arguments" "$bin/hand_loop" 1 2 3
refused char_gpt_context "^usage: char_gpt FILE" "$bin/char_gpt" text.txt 1 16 1

exit $failed
