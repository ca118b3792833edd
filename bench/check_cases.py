#!/usr/bin/env python3
"""Every benchmark the switch list (switches/list/switches.def) and bench/summary.py's comparisons name
must exist: each suite is asked for its benchmarks (--benchmark_list_tests, which registers the GPU
pairs even without a GPU) and each pair's off and on names are looked up among them. A catalogue entry
naming a case that no suite registers fails here, before `make bench` spends minutes measuring.

    python3 bench/check_cases.py build/latest/bench   # exit 1, naming each missing benchmark
"""
import os, re, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
import optimizations_guide  # noqa: E402
import summary  # noqa: E402

SUFFIX = re.compile(r"/(real_time|manual_time|min_time:[^/]+|iterations:\d+|repeats:\d+)")  # as summary.load strips them


def expected():
    """(suite, benchmark name, what names it) for every pair side and comparison side."""
    for s in optimizations_guide.read_def():
        for b in s["benches"]:
            for side in ("off", "on"):
                name = f"{s['name']}/{side}" + (f"/{b['case']}" if b["case"] else "")
                yield b["suite"], name, f"switch {s['name']}"
    for label, suite, base, opt, _metric, _device in summary.COMPARISONS:
        yield suite, base, f"comparison '{label}'"
        yield suite, opt, f"comparison '{label}'"


def listed(bench_dir, suite):
    path = os.path.join(bench_dir, suite)
    if not os.access(path, os.X_OK):
        return None
    out = subprocess.run([path, "--benchmark_list_tests=true"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit(f"check_cases: {path} --benchmark_list_tests failed (exit {out.returncode}):\n{out.stderr}")
    return {SUFFIX.sub("", line.strip()) for line in out.stdout.splitlines() if line.strip()}


def main(argv):
    if len(argv) != 1:
        sys.exit(__doc__)
    bench_dir = argv[0]
    names, missing, checked = {}, [], 0
    for suite, name, why in expected():
        if suite not in names:
            names[suite] = listed(bench_dir, suite)
        if names[suite] is None:
            missing.append(f"{why}: suite {suite} is not built in {bench_dir}")
            continue
        checked += 1
        if name not in names[suite]:
            missing.append(f"{why}: {suite} registers no benchmark '{name}'")
    if missing:
        print(f"check_cases: {len(missing)} benchmark(s) named but not registered:", file=sys.stderr)
        for m in sorted(set(missing)):
            print("  " + m, file=sys.stderr)
        return 1
    print(f"check_cases: all {checked} benchmark names the switch list and comparisons use exist "
          f"in {len(names)} suites")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
