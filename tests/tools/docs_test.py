#!/usr/bin/env python3
"""The docs test themselves: README.md and docs/*.md checked against the tree and the CLI.

usage: docs_test.py ROOT DTR [FILE.md...]   (default: README.md and docs/*.md under ROOT)

1. Shown commands: in a fenced block, a line "$ COMMAND" (continued by trailing backslashes)
   is run from ROOT, with `dtr` and `bazel-bin/cli/dtr` as DTR and `mpirun` as mpirun
   --oversubscribe, and what it prints (stdout, then stderr) must be the lines that follow
   it in the block, exactly; a shown line "..." stands for any lines (none or more) up to
   the next shown one. Lines that differ run to run are marked by an HTML comment
   right before the block, `<!-- docs_test: varies REGEX -->`: on a line matching REGEX
   every number is compared as "#". `<!-- docs_test: skip WHY -->` leaves a block out.
2. JSON samples: every ```json block and every inline `{"...}` code span parses (with
   "..." eliding members: `{...}`, `[...]`, `,...`); a sample shown as a CLI's --json output
   (its text says --json, or it starts with "schema") has "schema": 1 first and every key
   it shows in docs/json.md's table with the table's type.
3. Paths: every `path` code span and every relative link naming a file of the repository
   (a path under one of its top-level folders, or a top-level file) exists.
4. Figures: every table with a measured column (us, ms, GB/s, a ratio) has a date
   (YYYY-MM-DD) in the 25 lines above it or in its chapter (between # or ## headings), and
   the command that made it (`bash ...`, `mpirun ...`, `dtr ...` in a code span) in the 25
   lines above it or in its section (between any headings).
Prints each failure with FILE:LINE and ends with "docs: N passed, N failed".
"""
import glob
import json
import os
import re
import subprocess
import sys

PROGRESS = re.compile(r"^dtr [a-z]+: .*: [0-9]+ of [0-9]+ done, [0-9]+ left \([0-9]+ s\)$")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json_schema  # noqa: E402  (docs/json.md's table)

ROOT, DTR = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
FILES = sys.argv[3:] or [os.path.join(ROOT, "README.md")] + sorted(
    glob.glob(os.path.join(ROOT, "docs", "*.md")))
TOP = {d for d in os.listdir(ROOT) if not d.startswith((".", "bazel-"))}
passed = failed = 0
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


def report(ok, where, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {where}: {what}")


def blocks(lines):
    """(first line index, lines, marker comments before it, info string) of each fence."""
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^\s*```(\w*)", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith("```"):
            j += 1
        marks, k = [], i - 1
        while k >= 0 and lines[k].strip().startswith("<!-- docs_test:"):
            marks.append(lines[k].strip()[len("<!-- docs_test:"):-len("-->")].strip())
            k -= 1
        out.append((i + 1, lines[i + 1:j], marks, m.group(1)))
        i = j + 1
    return out


def masked(line):
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", line)


def compare(got, want, varies):
    """None where got is what want shows, else the first difference. A shown line "..."
    stands for any lines (none or more) up to the next shown line."""
    def same(g, w):
        if any(v.search(w) for v in varies):
            g, w = masked(g), masked(w)
        return g.rstrip() == w.rstrip()
    k = 0
    for n, w in enumerate(want):
        if w.strip() == "...":
            nxt = next((x for x in want[n + 1:] if x.strip() != "..."), None)
            if nxt is None:
                return None
            while k < len(got) and not same(got[k], nxt):
                k += 1
            continue
        if k >= len(got) or not same(got[k], w):
            g = got[k] if k < len(got) else "(nothing)"
            return f"line {k + 1} of its output: shown '{w}', printed '{g}'"
        k += 1
    if k < len(got):
        return f"line {k + 1} of its output: shown (nothing), printed '{got[k]}'"
    return None


def run_shown(path, start, body, marks):
    varies = [re.compile(m.split(None, 1)[1]) for m in marks if m.startswith("varies ")]
    i = 0
    while i < len(body):
        if not body[i].startswith("$ "):
            i += 1
            continue
        at = start + i + 1
        cmd = body[i][2:]
        while cmd.endswith("\\") and i + 1 < len(body):
            i += 1
            cmd = cmd[:-1] + " " + body[i].strip()
        want = []
        i += 1
        while i < len(body) and not body[i].startswith("$ "):
            want.append(body[i])
            i += 1
        while want and want[-1].strip() == "":
            want.pop()
        shell = re.sub(r"(^|\s)(bazel-bin/cli/dtr|dtr)(\s)", rf"\1{DTR}\3", cmd, count=1)
        shell = re.sub(r"^mpirun ", "mpirun --oversubscribe ", shell)
        try:
            p = subprocess.run(["bash", "-c", shell], cwd=ROOT, env=ENV, capture_output=True,
                               text=True, timeout=120)
            # (a long run's progress lines on stderr come and go with the machine's load)
            got = [line for line in (p.stdout + p.stderr).rstrip("\n").split("\n")
                   if not PROGRESS.match(line)]
        except subprocess.TimeoutExpired:
            got = ["(timed out after 120 s)"]
        diff = compare(got, want, varies)
        report(diff is None, f"{path}:{at}", f"'$ {cmd[:70]}': {diff}")


ELISIONS = [(r"\{\s*\.\.\.\s*\}", "{}"), (r"\[\s*\.\.\.\s*\]", "[]"), (r",\s*\.\.\.\s*", ""),
            (r":\s*\.\.\.", ": null")]


def parse_sample(text):
    for pat, rep in ELISIONS:
        text = re.sub(pat, rep, text)
    return json.loads(text)


TABLE = json_schema.read_table(os.path.join(ROOT, "docs", "json.md"))


def check_keys(obj, where):
    """Every key of obj at any depth in the table, with its type (elided values pass)."""
    bad = []

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k not in TABLE:
                    bad.append(f"key '{k}' is not in docs/json.md's table")
                elif x is not None and x != {} and x != [] and not json_schema.fits(x, TABLE[k]):
                    bad.append(f"key '{k}': {json.dumps(x)[:40]} is not {TABLE[k]}")
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(obj)
    report(not bad, where, "; ".join(bad[:3]))


def check_json(path, lines):
    text = "\n".join(lines)
    samples = []
    for start, body, marks, info in blocks(lines):
        if info == "json" and not any(m.startswith("skip") for m in marks):
            samples.append((start, "\n".join(body), False))
    for n, line in enumerate(lines):
        for m in re.finditer(r"`(\{\"[^`]*\})`", line):
            context = " ".join(lines[max(0, n - 2):n + 1])
            samples.append((n + 1, m.group(1), "--json" in context))
    for at, sample, cli in samples:
        where = f"{path}:{at}"
        try:
            obj = parse_sample(sample)
        except ValueError as e:
            report(False, where, f"a JSON sample does not parse ({e}): {sample[:60]}")
            continue
        report(True, where, "")
        if isinstance(obj, dict) and (cli or "schema" in obj):
            first = list(obj)[:1]
            full = sample.lstrip().startswith('{"schema"')
            report(first == ["schema"] and obj["schema"] == 1 or not full and not cli_top(obj),
                   where, f"a --json sample without \"schema\": 1 first: {sample[:60]}")
            check_keys(obj, where)
    del text


def cli_top(obj):
    """Whether a sample is a whole --json output (not a nested object shown alone)."""
    return any(k in obj for k in ("mesh", "command"))


def tracked():
    """The repository's files and folders (git ls-files), so a build output in the work tree
    never passes for one; None outside a git checkout (then the file system decides)."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return None
    paths = set()
    for f in filter(None, out):
        parts = f.split("/")
        for k in range(1, len(parts) + 1):
            paths.add("/".join(parts[:k]))
    return paths


TRACKED = tracked()


def exists(full):
    rel = os.path.relpath(full, ROOT)
    if TRACKED is None or rel.startswith(".."):
        return os.path.exists(full)
    return rel.rstrip("/") in TRACKED


PATH = re.compile(r"`([A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)+/?)`")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def check_paths(path, lines):
    here = os.path.dirname(path)
    for n, line in enumerate(lines):
        cands = [(m.group(1), ROOT) for m in PATH.finditer(line)]
        cands += [(m.group(1), here) for m in LINK.finditer(line) if "://" not in m.group(1)]
        for p, base in cands:
            first = p.split("/")[0]
            if base == ROOT and first not in TOP:
                continue  # an installed path (dtr/dtr.h, lib/...), not the repository's
            if any(c in p for c in "*<>") or "NAME" in p or "..." in p:
                continue
            full = os.path.normpath(os.path.join(base, p))
            report(exists(full), f"{os.path.relpath(path, ROOT)}:{n + 1}",
                   f"'{p}' does not exist")


MEASURED = re.compile(r"\|[^|\n]*(\bus\b|\bms\b|GB/s|ratio|x the|\bmedian)[^|\n]*\|", re.I)
DATE = re.compile(r"20\d\d-\d\d-\d\d")
COMMAND = re.compile(r"`[^`]*\b(bash|mpirun|dtr|bazel run|python3?|cuda_bench)\s[^`]*`"
                     r"|`[\w/.-]+\.sh`|^    \S*.*\bbash \S+\.sh", re.M)


def around(lines, n, level):
    """The lines from the heading above line n to the next heading (`level` "#": any heading;
    "##": one of level 1 or 2), the heading above included."""
    heading = re.compile(r"^#+ " if level == "#" else r"^##? ")
    a = n - 1
    while a >= 0 and not heading.match(lines[a]):
        a -= 1
    b = n + 1
    while b < len(lines) and not heading.match(lines[b]):
        b += 1
    return lines[max(0, a):b]


def check_figures(path, lines):
    n = 0
    while n < len(lines):
        if lines[n].startswith("|") and n + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|$", lines[n + 1]):
            if MEASURED.search(lines[n]):
                above = lines[max(0, n - 25):n]
                section = around(lines, n, "#")  # between the headings around it
                chapter = around(lines, n, "##")  # between the level 1-2 headings around it
                ok = DATE.search(" ".join(above + chapter)) is not None and \
                    COMMAND.search("\n".join(above + section)) is not None
                report(ok, f"{path}:{n + 1}",
                       "a table of measured figures without a date and the command that made "
                       "it above it")
            while n < len(lines) and lines[n].startswith("|"):
                n += 1
        n += 1


for f in FILES:
    rel = os.path.relpath(f, ROOT)
    lines = open(f, encoding="utf-8").read().split("\n")
    for start, body, marks, info in blocks(lines):
        if any(m.startswith("skip") for m in marks):
            continue
        if any(b.startswith("$ ") for b in body):
            run_shown(rel, start, body, marks)
    check_json(rel, lines)
    check_paths(f, lines)
    check_figures(rel, lines)

print(f"docs: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
