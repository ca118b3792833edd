#!/bin/sh
# Runs the GPU study's plan (tools/gpu_study.sh) on the CPU at a tiny size: the MLP on 256
# Fashion-MNIST images in memory and as PNG files, one epoch, two seeds (about 30 s on 2 cores),
# beside a summary standing for another machine's. Checks the report: a table per data set with every row the plan gives a
# CPU, seeds and the reports' finding; the AMP note; the side-by-side table; the table "AMP's price
# in accuracy" with finite, non-negative figures; the charts, summary.csv, the sample orders
# bench/torch_study.py trains on, and the CSV files.
# Usage: tests/run_study.sh BUILD/mdl-study
set -eu
study=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL study: $*"; exit 1; }

# A summary standing for another machine's, in the columns tools/mdl_train/study_report.cpp writes.
other="$work/other.csv"
cat > "$other" <<'CSV'
device,machine,commit,data,model,config,seeds,planned_seeds,s_per_epoch,s_per_epoch_min,s_per_epoch_max,speedup,speedup_min,speedup_max,to_target_s,to_target_min,to_target_max,reached,target_percent,data_wait_percent,peak_mib,peak_ratio,val_accuracy,verdict
cpu,Other CPU,abc1234,png,mlp,baseline,1,1,2.5,2.5,2.5,1,1,1,,,,0,85,40,5,1,70,
cpu,Other CPU,abc1234,png,mlp,+cache-file,1,1,1.25,1.25,1.25,2,2,2,,,,0,85,5,5,1,70,holds: 2.00x (one seed)
CSV
if ! MDL_STUDY="$study" "$here/tools/gpu_study.sh" --device cpu --models mlp --decoded-models mlp --subset 256 \
  --epochs 1 --seeds 2 --no-torch --budget 900 --out "$work" --compare "$other" > "$work/study.out" 2>&1; then
  tail -n 20 "$work/study.out"; fail "exit status from gpu_study.sh"
fi
md="$work/study-gpu.md"
[ -f "$md" ] || fail "no $md"

# A table's rows: from its heading to the first blank line, past the header and its rule.
table() { awk -v h="$1" 'index($0, h) == 1 { on = 1; next } on && /^$/ && n > 0 { exit } on && /^\|/ { n++; if (n > 2) print }' "$md"; }
memory=$(table "## Fashion-MNIST in memory")
decoded=$(table "## Fashion-MNIST as PNG files")
[ "$(echo "$memory" | cut -d'|' -f2 | tr -d ' ' | paste -sd,)" = "baseline,+amp,+amp-bf16,+grad-accum,all" ] ||
  fail "the in-memory table's rows are not the plan's for the MLP on a CPU: $(echo "$memory" | cut -d'|' -f2 | paste -sd,)"
[ "$(echo "$decoded" | cut -d'|' -f2 | tr -d ' ' | paste -sd,)" = "baseline,+cache-memory,+cache-file,+amp,all" ] ||
  fail "the decoded table's rows are not the plan's"
printf "%s\n%s\n" "$memory" "$decoded" | awk -F'|' '$4 !~ /^ 2 $/ { exit 1 }' || fail "a row without its 2 seeds"
echo "$memory" | grep '^| +amp |' | awk -F'|' '$12 !~ /(hold|within noise)/ { exit 1 }' || fail "+amp has no finding"
grep -q '^AMP on this CPU: autocast f16 cannot pay on the CPU' "$md" || fail "the CPU table does not say why +amp cannot pay"
side=$(table "## The devices side by side")
echo "$side" | grep -q '^| png | mlp | +cache-file | [0-9.]* ([0-9.-]*) | .* | 1.25 | 2.00x | holds: 2.00x (one seed) |$' ||
  fail "no side-by-side row for png +cache-file with both machines' figures"
grep -q "^- cpu (STUDY_COMPARE): Other CPU, commit" "$md" || fail "the compared summary's machine is not named"

for stem in fashion-mnist_mlp png_mlp; do
  for chart in train_loss val_loss val_accuracy time; do
    f="$work/study/${stem}_$chart.png"
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "$f is not a PNG"
  done
done
[ "$(wc -l < "$work/study/summary.csv")" -eq 11 ] || fail "summary.csv does not have its 10 rows"
for seed in 0 1; do
  [ "$(wc -c < "$work/study/orders/fashion-mnist_mlp_seed$seed.order")" -eq 2048 ] || fail "seed $seed's order is not 256 int64s"
done

rows=$(table "## AMP's price in accuracy")
[ -n "$rows" ] || fail "no table \"AMP's price in accuracy\" in $md"
# Cells 5-11 (logits error ... underflow at the scaler's scale): numbers, a percent sign allowed.
bad=$(echo "$rows" | awk -F'|' '{ for (i = 6; i <= 12; i++) { c = $i; gsub(/^ +| +$/, "", c); sub(/%$/, "", c);
  if (c !~ /^[0-9]+(\.[0-9]+)?(e[-+][0-9]+)?$/) print "row " NR " cell " i - 1 ": \"" $i "\"" } }')
[ -z "$bad" ] || { echo "FAIL study: cells that are not finite non-negative numbers:"; echo "$bad"; exit 1; }
for dtype in f16 bf16; do
  echo "$rows" | grep -q "^| fashion-mnist | mlp | cpu | $dtype |" || fail "no $dtype row"
done
for csv in amp_precision.csv amp_precision_parameters.csv; do
  [ "$(wc -l < "$work/study/$csv")" -gt 2 ] || fail "$csv has no rows"
done
echo "ok   study: the GPU study's plan on the CPU, $(printf "%s\n%s\n" "$memory" "$decoded" | grep -c '^|') rows and AMP's price in accuracy"
