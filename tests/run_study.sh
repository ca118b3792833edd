#!/bin/sh
# Runs mdl-study at a tiny size (the MLP, 256 Fashion-MNIST images, one epoch, one seed, on the CPU)
# and checks its report: a time table with the sentence on what AMP can buy on this CPU, and the table "AMP's price in accuracy" with a row per
# autocast dtype whose figures are finite, non-negative numbers, and its CSV files.
# Usage: tests/run_study.sh BUILD/mdl-study
set -eu
study=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! STUDY_DATA=fashion-mnist STUDY_MODELS=mlp STUDY_SUBSET=256 STUDY_EPOCHS=1 STUDY_SEEDS=1 STUDY_DEVICES=cpu \
  STUDY_OUT="$work" "$study" > "$work/study.out" 2>&1; then
  echo "FAIL study: exit status from $study"; tail -n 20 "$work/study.out"; exit 1
fi
md="$work/study.md"
grep -q '^| baseline |' "$md" || { echo "FAIL study: no baseline row in $md"; exit 1; }
grep -q '^AMP on this CPU: autocast f16 cannot pay on the CPU' "$md" || { echo "FAIL study: the CPU table does not say why +amp cannot pay"; exit 1; }

# The table's rows: from the heading to the first blank line, past the header and its rule.
rows=$(awk '/^## AMP.s price in accuracy$/ { on = 1; next } on && /^$/ && n > 0 { exit } on && /^\|/ { n++; if (n > 2) print }' "$md")
[ -n "$rows" ] || { echo "FAIL study: no table \"AMP's price in accuracy\" in $md"; exit 1; }
# Cells 5-11 (logits error ... underflow at the scaler's scale): numbers, a percent sign allowed.
bad=$(echo "$rows" | awk -F'|' '{ for (i = 6; i <= 12; i++) { c = $i; gsub(/^ +| +$/, "", c); sub(/%$/, "", c);
  if (c !~ /^[0-9]+(\.[0-9]+)?(e[-+][0-9]+)?$/) print "row " NR " cell " i - 1 ": \"" $i "\"" } }')
[ -z "$bad" ] || { echo "FAIL study: cells that are not finite non-negative numbers:"; echo "$bad"; exit 1; }
for dtype in f16 bf16; do
  echo "$rows" | grep -q "^| fashion-mnist | mlp | cpu | $dtype |" || { echo "FAIL study: no $dtype row"; exit 1; }
done
for csv in amp_precision.csv amp_precision_parameters.csv; do
  [ "$(wc -l < "$work/study/$csv")" -gt 2 ] || { echo "FAIL study: $csv has no rows"; exit 1; }
done
echo "ok   study: AMP's price in accuracy, $(echo "$rows" | wc -l) rows"
