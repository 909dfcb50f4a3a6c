#!/usr/bin/env bash
# dtr layout --svg and dtr plan --svg (redistribute/planner/svg.c): every picture parses as
# XML (python3's xml.etree); a layout has one mark per rank and one per distinct block; a
# plan within one mesh one line per step of its --json; a change between meshes one mark per
# message of its --json (messages and local copies), or per pair of ranks past 4096; a
# the pictures of the docs (docs/pictures/) drawn again, byte for byte; and the unhappy paths: an
# unwritable path or a refused plan leave no file, and a file already there as it was.
# Usage: cli_svg.sh DTR
set -u
dtr=$1
here=$(cd "$(dirname "$0")" && pwd)
source "$here/check_lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work" "$out" "$err"' EXIT

# marks FILE CLASS: how many <rect class="CLASS"> the SVG holds; fails where it does not parse
marks() {
    python3 - "$1" "$2" <<'PYEOF'
import sys, xml.etree.ElementTree as E
t = E.parse(sys.argv[1])
assert t.getroot().tag == "{http://www.w3.org/2000/svg}svg", t.getroot().tag
print(sum(1 for r in t.iter("{http://www.w3.org/2000/svg}rect") if r.get("class") == sys.argv[2]))
PYEOF
}
# steps FILE: the <text class="step"> lines
steps() {
    python3 -c 'import sys, xml.etree.ElementTree as E; print(sum(1 for t in E.parse(sys.argv[1]).iter("{http://www.w3.org/2000/svg}text") if t.get("class") == "step"))' "$1"
}
# jfield JSON KEY: a top-level number of a --json output
jfield() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
expect() { # NAME GOT WANT
    if [ "$2" = "$3" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1: got '$2', want '$3'"; fi
}

# layouts: a mark per rank, one per distinct non-empty block (replicas drawn once)
check "layout svg" 0 0 "" "" layout --mesh 2x2 --shape 10x3 --placements 'S(0),R' --svg "$work/l.svg"
expect "layout: ranks" "$(marks "$work/l.svg" rank)" 4
expect "layout: blocks (2 distinct of 4 holders)" "$(marks "$work/l.svg" block)" 2
check "layout svg uneven, an empty shard" 0 0 "" "" layout --mesh 4 --shape 3x2 --placements 'S(0)' --svg "$work/l2.svg"
expect "layout: 3 non-empty blocks of 4 ranks" "$(marks "$work/l2.svg" block)" 3
check "layout svg 3-d" 0 0 "" "" layout --mesh 2x3 --shape 4x6x5 --placements 'S(1),S(2)' --svg "$work/l3.svg"
expect "layout 3-d: 6 blocks" "$(marks "$work/l3.svg" block)" 6
check "layout svg to stdout" 0 0 "<svg" "" layout --mesh 2 --shape 4 --placements 'S(0)' --svg -
check "layout svg 256 ranks" 0 0 "" "" layout --mesh 16x16 --shape 64x64 --placements 'S(0),S(1)' --svg "$work/l4.svg"
expect "layout 256 ranks: 256 blocks" "$(marks "$work/l4.svg" block)" 256

# a plan within one mesh: a line per step
for c in "2x2 8x6 S(0),S(1) R,S(0)" "4 16 S(0) R" "2x2 8x8 P,S(0) S(1),R" "2 4 R R"; do
    read -r m s f t <<<"$c"
    check "plan svg $c" 0 0 "" "" plan --mesh "$m" --shape "$s" --from "$f" --to "$t" --svg "$work/p.svg"
    "$dtr" plan --mesh "$m" --shape "$s" --from "$f" --to "$t" --json >"$work/p.json"
    expect "plan $c: steps" "$(steps "$work/p.svg")" \
        "$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["steps"]))' "$work/p.json")"
    expect "plan $c: blocks drawn on both sides" "$([ "$(marks "$work/p.svg" block)" -gt 0 ] && echo yes)" yes
done
cat >"$work/batch.json" <<'EOF2'
[{"shape": "8x6", "from": "S(0)", "to": "R"}, {"shape": "6", "dtype": "bf16", "from": "R", "to": "S(0)"},
 {"shape": "4x4", "from": "S(1)", "to": "S(0)"}, {"shape": "2", "from": "R", "to": "R"},
 {"shape": "3x3", "from": "S(0)", "to": "S(1)"}]
EOF2
check "plan svg of a batch" 0 0 "" "" plan --mesh 2 --batch "$work/batch.json" --svg "$work/b.svg"
expect "batch: its first 4 tensors, each side" "$(python3 -c 'import sys; s = open(sys.argv[1]).read(); print(s.count(">tensor "), "and 1 more tensors" in s)' "$work/b.svg")" "8 True"

# between meshes: a mark per message (the kept boxes too)
for c in "2 - 3 2,3,4 8x6 S(0) S(1)" "2x2 - 4 3,2,1,0 8x8 S(0),S(1) S(1)" "4 - 2 1,2 12x4 S(0) R"; do
    read -r m r tm tr s f t <<<"$c"
    check "cross svg $c" 0 0 "" "" plan --mesh "$m" --shape "$s" --from "$f" --to-mesh "$tm" --to-ranks "$tr" --to "$t" --svg "$work/x.svg"
    "$dtr" plan --mesh "$m" --shape "$s" --from "$f" --to-mesh "$tm" --to-ranks "$tr" --to "$t" --json >"$work/x.json"
    expect "cross $c: a mark per message" "$(marks "$work/x.svg" msg)" \
        "$(( $(jfield "$work/x.json" messages) + $(jfield "$work/x.json" local_copies) ))"
done
check "cross svg 80 -> 80, past 4096 messages" 0 0 "" "" plan --mesh 80 --shape 80x80 --from 'S(0)' --to-mesh 80 --to-ranks "$(seq -s, 80 159)" --to 'S(1)' --svg "$work/big.svg"
expect "cross 80 -> 80: a mark per pair" "$(marks "$work/big.svg" pair)" 6400
expect "cross 80 -> 80: no mark per message" "$(marks "$work/big.svg" msg)" 0

# the pictures the docs show (docs/pictures/), drawn again: the same bytes (after a deliberate
# change to the pictures, regenerate them with the commands here)
docs=$here/../../docs/pictures
golden() { # FILE ARGS...: dtr ARGS... --svg draws docs/pictures/FILE
    local file=$1
    shift
    check "picture $file" 0 0 "" "" "$@" --svg "$work/$file"
    if cmp -s "$work/$file" "$docs/$file"; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: docs/pictures/$file differs from: dtr $* --svg FILE"
        diff "$work/$file" "$docs/$file" | head -5
    fi
}
golden plan_2x2.svg plan --mesh 2x2 --shape 8x6 --from 'S(0),S(1)' --to 'R,S(0)'
golden cross_2_to_3.svg plan --mesh 2 --shape 8x6 --from 'S(0)' --to-mesh 3 --to-ranks 2,3,4 --to 'S(1)'
golden layout_2x2.svg layout --mesh 2x2 --shape 10x3 --placements 'S(0),R'

# what a plan's picture says: the gradient's steps with --backward, an exchange over the
# whole mesh with its whole placement lists
check "backward svg" 0 0 "" "" plan --mesh 2x2 --shape 8x8 --from 'S(0),S(1)' --to 'R,R' --backward --svg "$work/bw.svg"
expect "backward: the gradient's plan" "$(grep -c 'R,R -&gt; S(0),S(1)' "$work/bw.svg")" 1
check "exchange svg" 0 0 "" "" plan --mesh 2x2 --shape 8x8 --from 'S(0),S(1)' --to 'S(1),S(0)' --svg "$work/ex.svg"
expect "exchange: its lists" "$(grep -c 'over the mesh, S(0),S(1) -&gt; S(1),S(0)' "$work/ex.svg")" 1
check "cross svg with a reduction first" 0 0 "" "" plan --mesh 2 --shape 8 --from 'P' --to-mesh 2 --to-ranks 2,3 --to 'S(0)' --svg "$work/pre.svg"
expect "cross: the source mesh's reduction named" "$(grep -c 'first, on the source mesh' "$work/pre.svg")" 1

# large: replicas drawn once at any size, and past 4096 distinct blocks a line instead
check "layout R on 4096 ranks" 0 0 "" "" layout --mesh 4096 --shape 64 --placements R --svg "$work/r.svg"
expect "R on 4096 ranks: one block" "$(marks "$work/r.svg" block)" 1
check "layout of a million blocks" 0 0 "" "" layout --mesh 1024x1024 --shape 4096x4096 --placements 'S(0),S(1)' --svg "$work/m.svg"
expect "a million blocks: none drawn, said" "$(marks "$work/m.svg" block) $(grep -c 'too many to draw' "$work/m.svg")" "0 1"
expect "a million blocks: a small file" "$([ "$(stat -c %s "$work/m.svg")" -lt 4096 ] && echo small)" small

# files: nothing written where the call fails, a file there left as it was, its mode kept,
# a symlink written through, a device written into
check "svg into a missing folder" 0 2 "" "--svg: cannot write '$work/none/x.svg' (No such file or directory)" layout --mesh 2 --shape 4 --placements R --svg "$work/none/x.svg"
echo keep >"$work/kept.svg"
echo precious >"$work/kept.svg.tmp"
check "svg of a refused plan" 0 3 "" "dtr plan:" plan --mesh 2 --shape 4 --from 'S(0)' --to 'P(max)' --svg "$work/kept.svg"
expect "the file there is as it was" "$(cat "$work/kept.svg")" keep
check "svg of a bad layout" 0 2 "" "--placements" layout --mesh 2 --shape 4 --placements 'S(3)' --svg "$work/kept.svg"
expect "still as it was" "$(cat "$work/kept.svg")" keep
check "svg with an empty path" 0 2 "" "--svg: '' is not a file name" layout --mesh 2 --shape 4 --placements R --svg ''
check "svg into a directory" 0 2 "" "--svg: '$work' is a directory" layout --mesh 2 --shape 4 --placements R --svg "$work"
chmod 600 "$work/kept.svg"
check "svg over a file of mode 600" 0 0 "" "" layout --mesh 2 --shape 4 --placements R --svg "$work/kept.svg"
expect "its mode kept" "$(stat -c %a "$work/kept.svg")" 600
expect "a file named like a temporary one left alone" "$(cat "$work/kept.svg.tmp")" precious
expect "no temporary file left" "$(ls "$work" | grep -c '^kept\.svg\.[A-Za-z0-9]\{6\}$')" 0
ln -s kept.svg "$work/link.svg"
check "svg through a symlink" 0 0 "" "" layout --mesh 2 --shape 4 --placements 'S(0)' --svg "$work/link.svg"
expect "the link stays a link, its target drawn" "$([ -L "$work/link.svg" ] && grep -c 'class="block"' "$work/kept.svg")" 2
check "svg into /dev/null" 0 0 "" "" layout --mesh 2 --shape 4 --placements R --svg /dev/null
expect "/dev/null stays a device" "$([ -c /dev/null ] && echo device)" device

echo "cli svg: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
