#!/usr/bin/env python3
"""docs/OPTIMIZATIONS.md, the learner's guide to every optimization switch, written from the one place
each switch is declared (switches/list/switches.def: what it does, why it pays, where it lives, when it
does not) and from the figures `make bench` recorded per machine kind (bench/results/<kind>.json, the
same records bench/RESULTS.md is written from). No sentence or figure in the page is written by hand.

    python3 tools/optimizations_guide.py           # rewrite docs/OPTIMIZATIONS.md
    python3 tools/optimizations_guide.py --check   # exit 1 when the page is stale or an entry is incomplete

The check also fails when an entry's "where it lives" names a file that does not exist or a function
that file does not mention, so the guide cannot point a reader at code that moved.
"""
import glob, json, os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEF = os.path.join(ROOT, "switches", "list", "switches.def")
OUT = os.path.join(ROOT, "docs", "OPTIMIZATIONS.md")
RECORDS = os.path.join(ROOT, "bench", "results")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import machine  # noqa: E402

MECHANISMS = ["fewer bytes", "wider vectors", "fewer launches", "fewer branches", "less work", "less precision",
              "overlap", "fewer allocations", "less memory"]
TOGGLE_FIELDS = ["name", "default", "device", "changes", "benches", "mechanism", "why", "where", "costs"]
OPTION_FIELDS = ["name", "set_by", "default", "device", "changes", "benches", "mechanism", "why", "where", "costs"]
TOKEN = re.compile(r'\s+|//[^\n]*|"(?:\\.|[^"\\])*"|[A-Za-z_][A-Za-z0-9_]*|[(),]')


def tokens(text):
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise SystemExit(f"optimizations_guide: {DEF}: cannot read '{text[pos:pos + 20]}'")
        pos = m.end()
        t = m.group(0)
        if not t.isspace() and not t.startswith("//"):
            yield t


def parse_args(toks, i):
    """The comma-separated arguments of the call whose '(' is at toks[i]: each a list of tokens."""
    assert toks[i] == "("
    args, cur, depth = [], [], 0
    i += 1
    while True:
        t = toks[i]
        if t == "(":
            depth += 1
        elif t == ")":
            if depth == 0:
                args.append(cur)
                return args, i + 1
            depth -= 1
        elif t == "," and depth == 0:
            args.append(cur)
            cur = []
            i += 1
            continue
        cur.append(t)
        i += 1


def literal(arg):
    """Adjacent string literals joined, as the C++ compiler joins them; or a bare identifier."""
    if len(arg) == 1 and not arg[0].startswith('"'):
        return arg[0]
    if not all(t.startswith('"') for t in arg):
        raise SystemExit(f"optimizations_guide: expected a string, got {' '.join(arg)}")
    return "".join(json.loads(t) for t in arg)


def benches(arg):
    """(B(suite, case, metric, device), ...) -> list of dicts."""
    out, i = [], 1
    while i < len(arg) - 1:
        if arg[i] == ",":
            i += 1
            continue
        if arg[i] != "B":
            raise SystemExit(f"optimizations_guide: expected B(...) in a bench list, got {arg[i]}")
        fields, i = parse_args(arg, i + 1)
        suite, case, metric, device = (literal(f) for f in fields)
        out.append({"suite": suite, "case": case, "metric": metric, "device": device})
    return out


def read_def(path=DEF):
    with open(path) as f:
        toks = list(tokens(f.read()))
    entries, i = [], 0
    while i < len(toks):
        kind = {"MDL_TOGGLE": "toggle", "MDL_OPTION": "option"}.get(toks[i])
        if not kind:
            raise SystemExit(f"optimizations_guide: {path}: unexpected '{toks[i]}'")
        args, i = parse_args(toks, i + 1)
        names = TOGGLE_FIELDS if kind == "toggle" else OPTION_FIELDS
        if len(args) != len(names):
            raise SystemExit(f"optimizations_guide: {path}: {kind} '{args[0]}' has {len(args)} fields, "
                             f"expected {len(names)} ({', '.join(names)})")
        e = {"kind": kind}
        for name, arg in zip(names, args):
            e[name] = benches(arg) if name == "benches" else literal(arg)
        if kind == "toggle":
            e["set_by"] = f"toggles::set_{e['name']}(bool)"
            e["default"] = {"on_unless_asan": "on (off in AddressSanitizer builds)"}.get(e["default"], e["default"])
        entries.append(e)
    return entries


def problems(entries):
    """What is missing or wrong in the entries: one line each."""
    out = []
    for e in entries:
        n = e["name"]
        for field in ("changes", "why", "costs"):
            if len(e[field]) < 40:
                out.append(f"{n}: '{field}' is missing or too short to explain anything")
        if e["mechanism"] not in MECHANISMS:
            out.append(f"{n}: mechanism '{e['mechanism']}' is not one of: {', '.join(MECHANISMS)}")
        if not e["benches"]:
            out.append(f"{n}: no benchmark pair")
        path, _, func = e["where"].partition(": ")
        if not func:
            out.append(f"{n}: where '{e['where']}' is not 'file: function'")
        elif not os.path.isfile(os.path.join(ROOT, path)):
            out.append(f"{n}: where names {path}, which does not exist")
        else:
            with open(os.path.join(ROOT, path)) as f:
                if func.split("::")[-1] not in f.read():
                    out.append(f"{n}: where names {func}, which {path} does not mention")
    return out


def gains():
    """{kind: (label, commit, recorded, {row: gain_text}, command)} from every recorded kind."""
    out = {}
    for path in sorted(glob.glob(os.path.join(RECORDS, "*.json"))):
        with open(path) as f:
            rec = json.load(f)
        kind = rec["machine"]["kind"]
        label = machine.LABELS.get(kind, kind)
        rows = {r["row"]: r for r in rec["rows"]}
        out[kind] = (label, rec.get("commit", "?"), rec.get("recorded", rec.get("date", "?")), rows,
                     rec.get("command", "make bench"))
    return out


def gain_cell(r, device, kind):
    if r is not None:
        return r.get("gain_text") or "?"
    return "needs a GPU" if device == "cuda" and not kind.startswith("nvidia") else "not measured"


def render(entries, measured):
    lines = [
        "# Optimizations: what each switch does, why it pays, and when it does not",
        "",
        "<!-- Generated by tools/optimizations_guide.py from switches/list/switches.def and bench/results/;",
        "     edit those, then run `make docs`. -->",
        "",
        "mdl can turn every optimization it teaches on and off. Each one below is declared once, in",
        "`switches/list/switches.def`: that entry generates its flag and setter (a *toggle*, flipped at run",
        "time with `toggles::set_NAME(on)` or `switches::set(\"NAME\", on)`), or documents the flag or API",
        "that chooses it for a run (an *option*), names the benchmark pair that measures it, and holds the",
        "text of its section here. The gains are `make bench`'s medians with their range over the",
        "repetitions, per machine kind, as recorded in [bench/RESULTS.md](../bench/RESULTS.md); a range",
        "that reaches 1.0x is within noise there.",
        "",
        "The mechanisms: **fewer bytes** (less memory traffic), **wider vectors** (more values per",
        "instruction), **fewer launches** (less fixed cost per kernel), **fewer branches**, **less work**",
        "(fewer operations for the same result), **less precision** (narrower numbers, faster units),",
        "**overlap** (two things at once), **fewer allocations**, **less memory**.",
        "",
        "## Every switch",
        "",
        "| switch | kind | default | acts on | set by | mechanism |",
        "|---|---|---|---|---|---|",
    ]
    for e in entries:
        set_by = e["set_by"].replace("|", "\\|")  # a | inside a table cell ends the cell
        lines.append(f"| [{e['name']}](#{e['name']}) | {e['kind']} | {e['default']} | {e['device']} | "
                     f"`{set_by}` | {e['mechanism']} |")
    for e in entries:
        path, _, func = e["where"].partition(": ")
        lines += [
            "",
            f"## {e['name']}",
            "",
            f"*{e['kind']}, default {e['default']}, acts on {e['device']}, mechanism: {e['mechanism']}; "
            f"set by `{e['set_by']}`.*",
            "",
            f"**What it does.** {e['changes']}",
            "",
            f"**Why it pays.** {e['why']}",
            "",
            f"**Where it lives.** [`{path}`](../{path}): `{func}`.",
            "",
            f"**When it does not pay.** {e['costs']}",
            "",
            "**Measured** (off -> on):",
            "",
        ]
        # A GPU machine's record holds its GPU rows alone: it gets a column where the switch has one.
        devices = {b["device"] for b in e["benches"]}
        kinds = [k for k in sorted(measured) if not k.startswith("nvidia") or "cuda" in devices]
        header = "| benchmark | metric | " + " | ".join(measured[k][0] for k in kinds) + " |"
        lines += [header, "|---|---|" + "---|" * len(kinds)]
        for b in e["benches"]:
            row = f"{e['name']} {b['case']}".strip()
            cells = [gain_cell(measured[k][3].get(row), b["device"], k) for k in kinds]
            lines.append(f"| {b['suite']} {b['case']} ({b['device']}) | {b['metric']} | " + " | ".join(cells) + " |")
    lines += ["", "## Where the figures come from", ""]
    for k in sorted(measured):
        label, commit, recorded, _, command = measured[k]
        lines.append(f"- {label}: `{command}` at {commit}, recorded {recorded}.")
    if not measured:
        lines.append("- No machine kind is recorded yet: run `make bench` then `make bench-record`.")
    lines.append("")
    return "\n".join(lines)


def main(argv):
    entries = read_def()
    found = problems(entries)
    if found:
        print("optimizations_guide: switches/list/switches.def is incomplete:", file=sys.stderr)
        for p in found:
            print("  " + p, file=sys.stderr)
        return 1
    text = render(entries, gains())
    if "--check" in argv:
        try:
            with open(OUT) as f:
                current = f.read()
        except OSError:
            current = None
        if current != text:
            print("optimizations_guide: docs/OPTIMIZATIONS.md is not what switches/list/switches.def and "
                  "bench/results/ give; run `make docs`", file=sys.stderr)
            return 1
        print(f"optimizations_guide: docs/OPTIMIZATIONS.md is current ({len(entries)} switches)")
        return 0
    tmp = OUT + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, OUT)
    print(f"optimizations_guide: wrote {os.path.relpath(OUT, ROOT)} ({len(entries)} switches, "
          f"{len(gains())} machine kinds)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
