#!/usr/bin/env python3
"""bench/RESULTS.md, written from the figures `make bench` measured: one table per machine kind
(bench/machine.py), each from that kind's last recorded run (bench/results/<kind>.json), with the
commit and date it ran at. No figure in it is written by hand; the dated narrative of every
measurement, and the figures of kinds not yet recorded this way, are in bench/log/.

    python3 bench/results.py record build/latest/bench/results   # keep this run as its kind's figures
    python3 bench/results.py record-check build/latest/roofline-check.json   # make roofline-check's result
    python3 bench/results.py write                               # rewrite bench/RESULTS.md only
"""
import csv, datetime, glob, json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpu_goals  # noqa: E402
import machine  # noqa: E402

RECORDS = os.path.join(HERE, "results")
OUT = os.path.join(HERE, "RESULTS.md")
LOG = os.path.join(HERE, "log")

# The kinds seen so far, each listed even before it has a record (its figures are then only in the log).
KNOWN_KINDS = {k: machine.LABELS[k] for k in ("amd-zen3", "amd-zen4", "amd-zen5", "intel-xeon-amx",
                                              "intel-xeon-icelake", "nvidia-h100", "nvidia-h200")}
LOG_KEYS = {  # words in a log file's name that say which kind it measured
    "amd-zen3": ["zen3"], "amd-zen4": ["zen4"], "amd-zen5": ["zen5"], "intel-xeon-amx": ["xeon-amx"],
    "intel-xeon-icelake": ["xeon-icelake"], "nvidia-h100": ["h100"],
    "nvidia-h200": ["h200"],
}


def git_commit():
    try:
        return subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def record(results_dir):
    with open(os.path.join(results_dir, "summary.json")) as f:
        summary = json.load(f)
    if not summary["rows"]:
        sys.exit(f"results.py: {results_dir}/summary.json has no measured row; nothing recorded")
    reps = max(r["runs"] for r in summary["rows"])
    summary.setdefault("commit", git_commit())  # a GPU run's summary names the bundle's commit and its date
    summary.setdefault("recorded", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    summary.setdefault("command", f"make bench BENCH_REPS={reps}")  # a GPU run's summary names its own
    try:  # the roofline ceilings make bench measured first, beside the binaries
        if "ceilings" not in summary:
            with open(os.path.join(results_dir, os.pardir, os.pardir, "roofline.json")) as f:
                summary["ceilings"] = json.load(f)
    except (OSError, ValueError):
        pass
    try:  # make roofline-check's last result beside them, when it ran on this kind
        with open(os.path.join(results_dir, os.pardir, os.pardir, "roofline-check.json")) as f:
            check = json.load(f)
        if check["machine"]["kind"] == summary["machine"]["kind"]:
            summary["roofline_check"] = check
    except (OSError, ValueError, KeyError):
        pass
    path = save(summary)
    print(f"results.py: recorded {len(summary['rows'])} rows as {os.path.relpath(path)}")
    write()


def save(summary):
    os.makedirs(RECORDS, exist_ok=True)
    path = os.path.join(RECORDS, summary["machine"]["kind"] + ".json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    return path


def record_check(check_path):
    """Keeps make roofline-check's result with its kind's recorded figures."""
    with open(check_path) as f:
        check = json.load(f)
    kind = check["machine"]["kind"]
    path = os.path.join(RECORDS, kind + ".json")
    if not os.path.exists(path):
        sys.exit(f"results.py: no make bench recorded for {kind} yet ({os.path.relpath(path)}); record one first")
    with open(path) as f:
        summary = json.load(f)
    summary["roofline_check"] = check
    save(summary)
    print(f"results.py: kept {check_path} with {os.path.relpath(path)}")
    write()


def logs_for(kind):
    keys = LOG_KEYS.get(kind, [kind])
    return [os.path.basename(p) for p in sorted(glob.glob(os.path.join(LOG, "*.md"))) if any(k in p for k in keys)]


def cell(text):
    return str(text).replace("|", "\\|")


def ceilings_lines(c):
    """One sentence with the machine's measured ceilings (mdl-roofline), the limits '% of limit' uses."""
    if not c or "cpu" not in c:
        return []
    cpu = c["cpu"]
    fma = ", ".join(f"{isa} {v / 1e3:.0f}" for isa, v in sorted(cpu.get("f32_fma_mflops", {}).items()))
    bf16 = ", ".join(f"{isa} {v / 1e3:.0f}" for isa, v in sorted(cpu.get("bf16_dot_mflops", {}).items()))
    text = (f"Ceilings (mdl-roofline, {cpu.get('threads', '?')} threads, {c.get('date', '?')}): f32 FMA {fma} GFLOP/s; "
            + (f"bf16 dot {bf16} GFLOP/s; " if bf16 else "")
            + f"memory {cpu.get('memory_mbps', 0) / 1e3:.1f} GB/s; L2 {cpu.get('l2_mbps', 0) / 1e3:.0f} GB/s.")
    gpu = c.get("gpu")
    if gpu:
        text += (f" GPU: f16 tensor {gpu.get('f16_tensor_mflops', 0) / 1e6:.0f}, bf16 tensor "
                 f"{gpu.get('bf16_tensor_mflops', 0) / 1e6:.0f}, TF32 tensor {gpu.get('tf32_tensor_mflops', 0) / 1e6:.0f}, "
                 f"f32 {gpu.get('f32_mflops', 0) / 1e6:.1f} TFLOP/s; memory {gpu.get('memory_mbps', 0) / 1e3:.0f} GB/s.")
    return [text, ""]


def roofline_check_lines(check):
    """make roofline-check's last result: mdl-roofline's ceilings against an independent loop."""
    if not check:
        return []
    parts = []
    for c in check["ceilings"].values():
        name, unit = c["name"].rstrip(")").split(" (")
        parts.append(f"{name} {c['mdl']:.1f} against {c['reference']:.1f} {unit} (ratio {c['ratio']:.3f}, rounds "
                     f"{c['ratio_min']:.3f}-{c['ratio_max']:.3f})")
    verdict = "agree within 10%" if check.get("agree") else "DISAGREE by more than 10%"
    return [f"mdl-roofline against an independent FMA loop and triad (`make roofline-check` at {check.get('commit', '?')}, "
            f"{check['rounds']} paired rounds, medians, {check['threads']} threads, {check['date']}): " +
            "; ".join(parts) + f": {verdict}.", ""]


def profile_lines(profiles):
    """The kernels with the most headroom in each profiled step (summary.py --profile)."""
    lines = []
    cols = ["Name", "Calls", "Mean us", "GFLOP/s", "GB/s", "Bound", "% of bound", "Headroom ms/step"]
    for p in profiles:
        lines += ["", f"Profiled with the roofline ceilings above: {p['title']}; the device kernels with the most "
                  "headroom (time above what the ceilings allow):", "",
                  "| kernel | calls | mean us | GFLOP/s | GB/s | bound | % of bound | headroom ms/step |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |" for r in p["rows"]]
    return lines


def study_lines(m):
    """The GPU study's figures (gpu_study.sh's summary.csv, kept as results/study/gpu-summary.csv)
    under the card they ran on."""
    path = os.path.join(RECORDS, "study", "gpu-summary.csv")
    try:
        with open(path) as f:
            rows = [r for r in csv.DictReader(f) if r["machine"] == m["model"]]
    except OSError:
        return []
    if not rows:
        return []
    def spread(r, key, unit=""):
        lo, hi = r.get(key + "_min", ""), r.get(key + "_max", "")
        v = f"{float(r[key]):.2f}{unit}"
        return v if not lo or lo == hi or int(r["seeds"]) < 2 else f"{v} ({float(lo):.2f}-{float(hi):.2f}{unit})"
    lines = ["", f"The study on this card (`gpu_study.sh`, commit {rows[0]['commit']}; median and range over the seeds "
             "that ran; speedup against the same seed's baseline; the full report and PyTorch beside it in the log):", "",
             "| data | model | configuration | seeds | s/epoch | speedup | to target (s) | data wait | peak MiB | finding |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        target = f"{float(r['to_target_s']):.1f}" if r.get("to_target_s") else "-"
        lines.append(f"| {r['data']} | {r['model']} | {r['config']} | {r['seeds']} of {r['planned_seeds']} | "
                     f"{spread(r, 's_per_epoch')} | {spread(r, 'speedup', 'x')} | {target} | "
                     f"{float(r['data_wait_percent']):.1f}% | {float(r['peak_mib']):.0f} | {cell(r['verdict'] or '-')} |")
    return lines


def table(summary):
    m = summary["machine"]
    host = f"{m['cores']} cores ({' '.join(m['features'])})" if m["features"] else f"{m['cores']} host cores"
    once = max((r["runs"] for r in summary["rows"]), default=1) == 1
    gain = ("Gain: one run of each side (no spread: a gain near 1.0x may be noise)." if once else
            "Gain: the median over the repetitions, with its min-max range; a range that reaches 1.0x is within noise.")
    lines = [f"## {m['label']}", "",
             f"{m['model']}, {host}. Recorded {summary['recorded']} at commit {summary['commit']} by "
             f"`{summary['command']}`. {gain}", "",
             *ceilings_lines(summary.get("ceilings")),
             *roofline_check_lines(summary.get("roofline_check")),
             "| optimization | kind | device | baseline | optimized | gain | % of limit |", "|---|---|---|---|---|---|---|"]
    for r in summary["rows"]:
        # Records older than the roofline have no limit_text.
        lines.append(f"| {cell(r['row'])} | {r['kind']} | {r['device']} | {cell(r['baseline_text'])} | "
                     f"{cell(r['optimized_text'])} | {cell(r['gain_text'])} | {cell(r.get('limit_text', ''))} |")
    lines += gpu_goals.goal_lines(summary.get("goals", []))
    lines += profile_lines(summary.get("profiles", []))
    lines += study_lines(m)
    logs = logs_for(m["kind"])
    if logs:
        lines += ["", "This kind's dated logs: " + ", ".join(f"[{n}](log/{n})" for n in logs) + "."]
    return "\n".join(lines)


def write():
    recorded = {}
    for path in sorted(glob.glob(os.path.join(RECORDS, "*.json"))):
        with open(path) as f:
            s = json.load(f)
        recorded[s["machine"]["kind"]] = s
    parts = ["# Current results", "",
             "Written by `bench/results.py` from `bench/results/<kind>.json`: do not edit by hand. Each table is "
             "the last `make bench` recorded on its machine kind (`make bench`, then `make bench-record`); "
             "compare figures only within one kind. The dated narrative of every measurement (the study, "
             "PyTorch side by side, the GPU leases, CI runs) is in [log/](log/).", ""]
    parts += ["Kinds: " + ", ".join(f"[{KNOWN_KINDS.get(k, k)}](#{k})" for k in recorded) + "." if recorded else
              "No kind recorded yet.", ""]
    for kind, s in recorded.items():
        parts += [f'<a id="{kind}"></a>', "", table(s), ""]
    missing = [k for k in KNOWN_KINDS if k not in recorded]
    if missing:
        parts += ["## Kinds seen, not yet recorded in this form", ""]
        for k in missing:
            logs = logs_for(k)
            where = ("its figures are in " + ", ".join(f"[{n}](log/{n})" for n in logs)) if logs else "no figures yet"
            parts.append(f"- {KNOWN_KINDS[k]}: {where}.")
        parts.append("")
    tmp = OUT + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(parts))
    os.replace(tmp, OUT)
    print(f"results.py: wrote {os.path.relpath(OUT)} ({len(recorded)} kinds)")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        record(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "record-check":
        record_check(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == "write":
        write()
    else:
        sys.exit(__doc__)
