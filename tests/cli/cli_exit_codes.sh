#!/usr/bin/env bash
# One exit-code table for every command (tests/data/exit_codes.txt): each row runs a command
# with one input of one class and wants its exit code (0 done, 1 a run failed, 2 an argument
# or an input file, 3 refused) and, on failure, one stderr line from rank 0 naming what was
# wrong. Then the table itself is checked: every command `dtr --help` lists has rows of the
# classes it can meet (an argument error each; a file error each that reads files; a refusal
# each that plans; a run failure each that runs). The Python side of the same table:
# python/tests/test_error_classes.py. Usage: cli_exit_codes.sh DTR TABLE
set -u
dtr=$1
table=$2
source "$(dirname "$0")/check_lib.sh"
W=$(mktemp -d)
trap 'rm -rf "$W" "$out" "$err"' EXIT

# The fixtures: a model file, a checkpoint (and a copy with a corrupt piece), rules, and a
# --input directory whose rank0.in is a directory.
echo '[{"shape": [64], "group": "a"}, {"shape": "8"}]' >"$W/model.json"
python3 - "$W" <<'PY'
import json, struct, sys
h = json.dumps({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}}).encode()
open(sys.argv[1] + "/m.safetensors", "wb").write(
    struct.pack("<Q", len(h)) + h + struct.pack("<16f", *range(16)))
PY
echo '[{"match": "*", "placements": "S(0)"}]' >"$W/s0.json"
echo '[{"match": "*", "placements": "P"}]' >"$W/rP.json"
echo '[{"match": "*", "placements": "S(0)", "dtype": "i32"}]' >"$W/rint.json"
mkdir -p "$W/in/rank0.in"
head -c 8 /dev/zero >"$W/in/rank1.in" # (rank 1's block of 4 f32 on 2 ranks: 8 bytes)
"${mpirun[@]}" -n 2 "$dtr" reshard --from "$W/m.safetensors" --to "$W/corrupt" --mesh 2 \
    --rules "$W/s0.json" >/dev/null 2>&1 || echo "FAIL: making the sharded fixture"
piece=$(ls "$W/corrupt"/rank-00001-*.safetensors)
printf '\x55' | dd of="$piece" bs=1 seek=$(($(stat -c %s "$piece") - 1)) conv=notrunc status=none

# Out of memory is a run failure: under AddressSanitizer malloc must return NULL as libc's
# does, or the sanitizer aborts first.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:allocator_may_return_null=1}
declare -A have=()
rows=0
while IFS= read -r line <&3; do
    case "$line" in '#'* | '') continue ;; esac
    IFS='|' read -r cmd ranks code class frag argtext <<<"$line"
    read -r cmd <<<"$cmd"; read -r ranks <<<"$ranks"; read -r code <<<"$code"
    read -r class <<<"$class"
    frag=$(sed -e 's/^ *//' -e 's/ *$//' <<<"$frag")
    [ "$frag" = "-" ] && frag=""
    frag=${frag//\$W/$W}
    eval "args=($argtext)"
    rows=$((rows + 1))
    have[$cmd.$class]=1
    check "$cmd, $class: dtr ${args[*]}" "$ranks" "$code" "" "$frag" "${args[@]}"
done 3<"$table"

# The table's coverage: the commands `dtr --help` lists, each with the classes it meets.
declare -A needs=([layout]="ok argument" [plan]="ok argument file refused"
    [run]="ok argument file refused run" [grad]="ok argument file run"
    [reshard]="ok argument file run")
listed=$("$dtr" --help | sed -n '/^commands:/,/^$/p' | awk 'NF > 1 {print $1}')
for cmd in $listed; do
    if [ -z "${needs[$cmd]:-}" ]; then
        fail=$((fail + 1))
        echo "FAIL: dtr --help lists '$cmd', which this test does not know: give it rows"
        continue
    fi
    for class in ${needs[$cmd]}; do
        if [ -n "${have[$cmd.$class]:-}" ]; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
            echo "FAIL: no row of $table drives '$cmd' to a $class exit"
        fi
    done
done
[ "$(wc -w <<<"$listed")" -ge 5 ] || { fail=$((fail + 1)); echo "FAIL: dtr --help lists: $listed"; }
echo "($rows rows)"
finish "cli exit codes"
