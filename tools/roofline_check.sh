#!/bin/sh
# make roofline-check: mdl-roofline's f32 FMA peak and memory bandwidth against an independent
# hand-written FMA loop and STREAM-style triad (tools/roofline_reference.c, built here with
# -march=native), each at mdl-roofline's thread count. A shared machine's bandwidth moves by a third
# from one second to the next, so a best-of over separate runs compares two different moments:
# instead each of ROUNDS rounds (7) measures one ceiling with mdl-roofline --probe and with the
# reference back to back (which goes first alternates), and the check passes when the median of the
# rounds' ratios lies within 10% of 1. The result goes to BUILD_DIR/roofline-check.json, which
# `python3 bench/results.py record-check` (or the next bench-record) keeps in bench/RESULTS.md.
# Usage: tools/roofline_check.sh BUILD_DIR (holding mdl-roofline)
set -eu
build=${1:?usage: tools/roofline_check.sh BUILD_DIR}
rounds=${ROUNDS:-7}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CC:-cc} -O3 -march=native -fopenmp tools/roofline_reference.c -o "$tmp/reference"
python3 - "$tmp/reference" "$build/mdl-roofline" "$rounds" "$build/roofline-check.json" "$(dirname "$0")/../bench" <<'PY'
import datetime, json, os, statistics, subprocess, sys
sys.path.insert(0, sys.argv[5])
import machine  # noqa: E402
reference, tool, rounds, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def run(cmd, env=None):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return dict(line.split() for line in out.splitlines())

probe = run([tool, "--probe", "memory"])  # mdl's compute threads and triad arrays, which the reference copies
threads, array_bytes = probe["threads"], probe["array_bytes"]
env = dict(os.environ, OMP_NUM_THREADS=threads)
ceilings = [("f32 FMA peak (GFLOP/s)", "fma", "fma", "fma_gflops"),
            ("memory triad (GB/s)", "memory", "triad", "triad_gbs")]
ok = True
record = {"machine": machine.machine(), "threads": int(threads), "rounds": rounds, "array_bytes": int(array_bytes),
          "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "ceilings": {},
          "commit": subprocess.run(["git", "-C", sys.argv[5], "describe", "--always", "--dirty"], capture_output=True,
                                   text=True).stdout.strip() or "?"}
print(f"{rounds} rounds at {threads} threads, each ceiling measured by both back to back"
      f" (triad arrays of {int(array_bytes) >> 20} MiB)")
print(f"{'':24} {'mdl-roofline':>12} {'reference':>10} {'ratio':>6}   (medians; ratios' range)")
for name, probe, ref_mode, key in ceilings:
    mine, theirs, ratios = [], [], []
    for r in range(rounds):
        if r % 2 == 0:
            x = float(run([tool, "--probe", probe])[key])
            y = float(run([reference, array_bytes, ref_mode], env)[key])
        else:
            y = float(run([reference, array_bytes, ref_mode], env)[key])
            x = float(run([tool, "--probe", probe])[key])
        mine.append(x)
        theirs.append(y)
        ratios.append(x / y)
    ratio = statistics.median(ratios)
    ok &= abs(ratio - 1) <= 0.10
    record["ceilings"][probe] = {"name": name, "mdl": statistics.median(mine), "reference": statistics.median(theirs),
                                 "ratio": ratio, "ratio_min": min(ratios), "ratio_max": max(ratios)}
    print(f"{name:24} {statistics.median(mine):12.1f} {statistics.median(theirs):10.1f} {ratio:6.3f}"
          f"   ({min(ratios):.3f}-{max(ratios):.3f})")
print(f"{threads} threads: " + ("agree within 10%" if ok else "DISAGREE by more than 10%"))
record["agree"] = ok
with open(out + ".tmp", "w") as f:
    json.dump(record, f, indent=1)
os.replace(out + ".tmp", out)
print(f"written to {out} (python3 bench/results.py record-check {out} keeps it in bench/RESULTS.md)")
sys.exit(0 if ok else 1)
PY
