#!/usr/bin/env bash
# docs/results.md is what bench/results_page.py writes from docs/results/ (the raw figures
# of one `bash bench/results.sh` run), and so is README.md's paragraph of figures: both
# rendered again here and compared byte for byte; every plot the page shows is there as a
# PNG; run.json names every step, with its command, seconds and date, and is not a --quick
# run. Then the parts: the table reader's exact values, and the
# unhappy paths (a figure changed in a copy of the data changes the page; a missing file is
# named; results.sh's bad arguments exit 2 naming them, before anything runs).
# Usage: results_page_test.sh (in the checkout; Python's standard library only)
set -u
cd "$(dirname "$0")/../.."
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cp README.md "$work/README.md"
if python3 bench/results_page.py --data docs/results --out "$work/results.md" --readme "$work/README.md" 2>"$work/err"; then
    if cmp -s "$work/README.md" README.md; then
        ok "README.md's paragraph of figures is bench/results_page.py's"
    else
        bad "README.md's paragraph of figures differs from what bench/results_page.py writes:
$(diff README.md "$work/README.md" | head -10)"
    fi
    if cmp -s "$work/results.md" docs/results.md; then
        ok "docs/results.md is bench/results_page.py's page of docs/results/"
    else
        bad "docs/results.md differs from what bench/results_page.py writes from docs/results/ (rerun: python3 bench/results_page.py --data docs/results --out docs/results.md):
$(diff docs/results.md "$work/results.md" | head -20)"
    fi
else
    bad "bench/results_page.py failed: $(tail -3 "$work/err")"
fi

n=0
for img in $(grep -oE '\]\(results/[^)]+\)' docs/results.md | sed 's/^](//; s/)$//'); do
    n=$((n + 1))
    if [ "$(head -c 8 "docs/$img" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then
        ok "docs/$img is a PNG"
    else
        bad "docs/results.md shows docs/$img, which is missing or not a PNG"
    fi
done
[ "$n" -ge 8 ] && ok "docs/results.md shows $n plots" || bad "docs/results.md shows $n plots, fewer than 8"

python3 - docs/results/run.json <<'PY' && ok "run.json: every step with its command, seconds and date; a full run" || bad "run.json (above)"
import json, re, sys
sys.path.insert(0, "bench")
from results_page import STEPS
run = json.load(open(sys.argv[1]))
errs = [f"step {s} missing" for s in STEPS if s not in run["steps"]]
for name, s in run["steps"].items():
    if not (s.get("command") and isinstance(s.get("seconds"), int) and
            re.fullmatch(r"\d{4}-\d\d-\d\d", s.get("date", "")) and
            re.fullmatch(r"[0-9a-f]{40}", s.get("commit", "")) and s.get("quick") is False):
        errs.append(f"step {name}: {s}")
if run.get("quick") is not False:
    errs.append("a --quick run is committed")
if run["total_seconds"] != sum(s["seconds"] for s in run["steps"].values()):
    errs.append("total_seconds is not the sum of the steps'")
for e in errs:
    print(e)
sys.exit(1 if errs else 0)
PY

python3 - <<'PY' && ok "the table reader: cells, numbers, separators" || bad "the table reader (above)"
import sys
sys.path.insert(0, "bench")
from results_page import md_tables, num, plan_bench_rows, rows_of, span
got = [num("**3.40**"), num("1,234.5"), num("2.0x"), num("-"), num("greedy"), num(" 7 ")]
want = [3.4, 1234.5, 2.0, None, None, 7.0]
text = "intro\n| a | b |\n|---|---:|\n| x | 1.5x |\n| y | - |\n\n| c |\n|---|\n| z |\n"
tabs = md_tables(text)
checks = [
    (got, want),
    (tabs, [(["a", "b"], [["x", "1.5x"], ["y", "-"]]), (["c"], [["z"]])]),
    (rows_of(text, 1), [{"c": "z"}]),
    (rows_of(text, 2), []),
    (plan_bench_rows("change dims ranks\nrotate  1  2  7.22  2.43  0.31  greedy  1\n"),
     [{"change": "rotate", "dims": 1, "ranks": 2, "optimal": 7.22, "compat": 2.43,
       "cached": 0.31, "candidate": "greedy", "steps": 1}]),
    (span([2.0, None, 0.5]), "0.50-2.00x"), (span([None]), "-"), (span([1.0, 1.0]), "1.00x"),
]
for g, w in checks:
    if g != w:
        print(f"got {g!r}, want {w!r}")
        sys.exit(1)
PY

# a figure changed in a copy of the data changes the page
cp -r docs/results "$work/data"
python3 - "$work/data/limit.md" <<'PY'
import re, sys
p = sys.argv[1]
lines = open(p).read().split("\n")
i = next(k for k, l in enumerate(lines) if l.startswith("| 2 |"))
cells = lines[i].split("|")
cells[9] = " 1.0 "  # dtr us
lines[i] = "|".join(cells)
open(p, "w").write("\n".join(lines))
PY
python3 bench/results_page.py --data "$work/data" --out "$work/changed.md" 2>/dev/null
if ! cmp -s "$work/changed.md" docs/results.md; then
    ok "a changed figure in limit.md changes the page"
else
    bad "a changed figure in limit.md left the page as it was"
fi
# a stray line inside a table, a "-" where a figure must be, a missing column: named errors
bad_copy() { # NAME FILE PYTHON-EXPR-ON-LINES WANT
    python3 - "$work/data/$2" "$3" <<'PY'
import sys
p, expr = sys.argv[1], sys.argv[2]
lines = open(p).read().split("\n")
exec(expr)
open(p, "w").write("\n".join(lines))
PY
    if python3 bench/results_page.py --data "$work/data" --out "$work/bad.md" 2>"$work/err"; then
        bad "$1: no error"
    elif grep -qF "$4" "$work/err" && [ ! -e "$work/bad.md" ]; then
        ok "$1: an error naming it ($4), no page written"
    else
        bad "$1: $(cat "$work/err")"
    fi
    cp "docs/results/$2" "$work/data/$2"
}
bad_copy "a stray line inside limit.md's table" limit.md "lines.insert(4, 'warning: hello')" \
    "limit.md: 2 tables where one was expected"
bad_copy "a '-' for dtr's time in limit.md" limit.md \
    "c = lines[2].split('|'); c[9] = ' - '; lines[2] = '|'.join(c)" "column 'dtr us' is '-', not a number"
bad_copy "grad.md without its 'grouped / bare' column" grad.md \
    "lines[:] = [l.replace('grouped / bare', 'grouped over bare') for l in lines]" \
    "grad.md: no column 'grouped / bare'"
rm "$work/data/grad.md"
if python3 bench/results_page.py --data "$work/data" --out "$work/missing.md" 2>"$work/err"; then
    bad "a missing grad.md was not an error"
elif grep -q "grad.md: No such file" "$work/err" && [ ! -e "$work/missing.md" ]; then
    ok "a missing grad.md is an error naming it, no page written"
else
    bad "a missing grad.md: $(cat "$work/err")"
fi

out=$(bash bench/results.sh --frobnicate 2>&1)
[ $? -eq 2 ] && grep -q "unknown argument '--frobnicate'" <<<"$out" && ok "results.sh: an unknown argument exits 2 naming it" || bad "results.sh --frobnicate: $out"
out=$(bash bench/results.sh --only speed,nope 2>&1)
[ $? -eq 2 ] && grep -q "unknown step 'nope'" <<<"$out" && ok "results.sh: --only with an unknown step exits 2 naming it" || bad "results.sh --only speed,nope: $out"
out=$(bash bench/results.sh --out 2>&1)
[ $? -eq 2 ] && grep -q "\-\-out: needs a value" <<<"$out" && ok "results.sh: --out without a value exits 2 naming it" || bad "results.sh --out: $out"
out=$(bash bench/results.sh --help 2>&1)
[ $? -eq 0 ] && grep -q "^Usage: bash bench/results.sh" <<<"$out" && ok "results.sh --help prints its usage" || bad "results.sh --help: $out"

echo "results page test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
