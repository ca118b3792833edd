#!/usr/bin/env python3
"""One table from a `make fuzz` run: per harness, the inputs tried, the corpus size, the coverage and what
went wrong. Exits 1 when any harness crashed, hung, leaked or ran out of memory (or failed to run).

usage: fuzz_table.py RUN_DIR HARNESS...   (RUN_DIR/<harness>/{log,rc,seconds,corpus/,artifacts/}, as the Makefile
writes them). "seconds" is how long the harness ran: less than asked when it stopped at its first failure.
libFuzzer names each saved input by what happened: crash-, timeout-, leak-, oom- (slow-unit- is not a failure).
"""
import os
import re
import sys


def stats(log):
    """(inputs tried, coverage) from -print_final_stats, else from the last status line."""
    execs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
    status = re.findall(r"^#(\d+)\s+\w+\s+cov: (\d+)", log, re.M)
    tried = int(execs[-1]) if execs else (int(status[-1][0]) if status else 0)
    cov = int(status[-1][1]) if status else 0
    return tried, cov


def first_error(log):
    for line in log.splitlines():
        if "ERROR:" in line or "runtime error:" in line or "terminate called" in line:
            return line.strip()[:110]
    return ""


def main():
    run, names = sys.argv[1], sys.argv[2:]
    rows, failed, notes = [], False, []
    for name in names:
        d = os.path.join(run, name)
        log = open(os.path.join(d, "log"), errors="replace").read() if os.path.exists(os.path.join(d, "log")) else ""
        rc = int(open(os.path.join(d, "rc")).read().strip() or 1) if os.path.exists(os.path.join(d, "rc")) else 1
        tried, cov = stats(log)
        seconds_file = os.path.join(d, "seconds")
        seconds = open(seconds_file).read().strip() if os.path.exists(seconds_file) else "?"
        corpus = len(os.listdir(os.path.join(d, "corpus"))) if os.path.isdir(os.path.join(d, "corpus")) else 0
        artifacts = os.listdir(os.path.join(d, "artifacts")) if os.path.isdir(os.path.join(d, "artifacts")) else []
        count = {k: sum(a.startswith(k + "-") for a in artifacts) for k in ("crash", "timeout", "leak", "oom")}
        if rc != 0 and not any(count.values()):
            count["crash"] = 1  # it stopped with an error but saved no input (a start-up failure)
        if rc != 0 or any(count.values()):
            failed = True
            notes.append("fuzz_%s (exit %d): %s; log %s" % (name, rc, first_error(log) or "see the log",
                                                            os.path.join(d, "log")))
        rows.append(("fuzz_" + name, seconds, tried, corpus, cov, count["crash"], count["timeout"], count["leak"] + count["oom"]))
    head = ("harness", "seconds", "inputs tried", "corpus", "coverage", "crashes", "hangs", "leaks/ooms")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    fmt = "  ".join("%-*s" if i == 0 else "%*s" for i in range(len(head)))
    print(fmt % tuple(v for pair in zip(widths, head) for v in pair))
    for r in rows:
        print(fmt % tuple(v for pair in zip(widths, r) for v in pair))
    for n in notes:
        print(n)
    if failed:
        print("fuzz: failures above; their inputs are under %s/<harness>/artifacts" % run)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
