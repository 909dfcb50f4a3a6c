#!/usr/bin/env bash
# `dtr plan --batch` and `dtr run --batch`: the rounds of a fixed list, a verified run on 4
# ranks (blocking and non-blocking, pattern and random values) with the JSON fields the
# issue asks for, and the errors of bad files and flags (one line, exit 2; a member change
# no plan exists for, exit 3).
# Usage: cli_batch.sh DTR
set -u
dtr=$1
source "$(dirname "$0")/check_lib.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir" "$out" "$err"' EXIT

cat >"$dir/mixed.json" <<'JSON'
[{"shape": "8x6", "from": "S(0),R", "to": "R,R"},
 {"shape": "8x6", "dtype": "f32", "from": "S(0),S(1)", "to": "R,R"},
 {"shape": "8x6", "from": "P,R", "to": "R,R"},
 {"shape": "5x3", "dtype": "bf16", "from": "P,P", "to": "R,S(1)"},
 {"shape": "4", "from": "R,S(0)", "to": "S(0),R"}]
JSON
check "plan: rounds" 0 0 '  2   0     all_gather      -                   2            192       5.02  0.1 1.2' "" \
    plan --mesh 2x2 --batch "$dir/mixed.json"
check "plan: collectives against one by one" 0 0 'collectives: all_gather 2 reduce_scatter 1 all_reduce 2 all_to_all 0 exchange 0 reduce_exchange 0 (one by one: all_gather 4' "" \
    plan --mesh 2x2 --batch "$dir/mixed.json"
check "plan: JSON rounds" 0 0 '"rounds":[{"kind":"all_gather","mesh_dim":1,"coalesced":true,"members":[[1,0],[4,0]]' "" \
    plan --mesh 2x2 --batch "$dir/mixed.json" --json
check "plan: JSON totals" 0 0 '"recv_bytes_per_rank_max":480,"lower_bound_recv_bytes_per_rank":460' "" \
    plan --mesh 2x2 --batch "$dir/mixed.json" --json

check "a directory as --batch" 0 2 "" "--batch: '$dir' is a directory, not a JSON file" \
    plan --mesh 2 --batch "$dir"
# Shapes as the JSON output prints them (arrays) read as their text form.
sed -E 's/"shape": "8x6"/"shape": [8, 6]/; s/"shape": "4"/"shape": [4]/' "$dir/mixed.json" >"$dir/arrays.json"
check "plan: shapes as arrays" 0 0 '"recv_bytes_per_rank_max":480,"lower_bound_recv_bytes_per_rank":460' "" \
    plan --mesh 2x2 --batch "$dir/arrays.json" --json
echo '[{"shape": [8, "6"], "from": "R", "to": "R"}]' >"$dir/array_str.json"
check "an array of a string" 0 2 "" "line 1, entry 0: an array of integers holds '\"'" \
    plan --mesh 2 --batch "$dir/array_str.json"
echo '[{"shape": "8x6", "from": ["R"], "to": "R"}]' >"$dir/array_from.json"
check "an array where a string goes" 0 2 "" "line 1, entry 0: expected a string in double quotes" \
    plan --mesh 2 --batch "$dir/array_from.json"

for flags in "" "--nonblocking --fill random --seed 9"; do
    # shellcheck disable=SC2086
    check "run: verified ($flags)" 4 0 '"ntensors":5,"verified":true' "" \
        run --mesh 2x2 --batch "$dir/mixed.json" --verify --json --iters 2 --warmup 0 $flags
done
check "run: the three medians" 4 0 '"batched_median_us":' "" \
    run --mesh 2x2 --batch "$dir/mixed.json" --json --iters 2 --warmup 0
check "run: one by one's collectives" 4 0 '"one_by_one_collectives":{"all_gather":4,"reduce_scatter":1,"all_reduce":2' "" \
    run --mesh 2x2 --batch "$dir/mixed.json" --json --iters 0
check "run: text" 4 0 'batch of 5 tensors on mesh 2x2: 5 rounds, 5 collectives (one plan at a time: 7)' "" \
    run --mesh 2x2 --batch "$dir/mixed.json" --verify --iters 0

echo '[]' >"$dir/empty.json"
check "empty list" 0 2 "" "the list is empty" plan --mesh 2 --batch "$dir/empty.json"
echo '[{"shape": "8", "from": "S(0)", "to": "R", "size": "3"}]' >"$dir/key.json"
check "unknown key" 0 2 "" 'line 1, entry 0: unknown key "size"' plan --mesh 2 --batch "$dir/key.json"
printf '[{"shape": "8", "from": "S(0)", "to": "R"},\n {"shape": "8", "from": "S(0)"}]\n' >"$dir/missing.json"
check "missing key, line and entry" 0 2 "" 'line 2, entry 1: "to" is missing' plan --mesh 2 --batch "$dir/missing.json"
echo '[{"shape": "8", "from": "S(0),R", "to": "R"}]' >"$dir/dims.json"
check "placements for another mesh" 0 2 "" "entry 0: from:" plan --mesh 2 --batch "$dir/dims.json"
echo '[{"shape": "8", "from": "S(0)", "to": "P(max)"}]' >"$dir/invalid.json"
check "a change that cannot be planned names the tensor" 0 3 "" "tensor 0 (src[0] -> dst[0])" plan --mesh 2 --batch "$dir/invalid.json"
check "no such file" 0 2 "" "--batch: cannot open" plan --mesh 2 --batch "$dir/nothing.json"
check "run: a change that cannot be planned" 2 3 "" "tensor 0 (src[0] -> dst[0])" run --mesh 2 --batch "$dir/invalid.json"
check "plan: --shape with --batch" 0 2 "" "--shape: not with --batch" plan --mesh 2 --batch "$dir/mixed.json" --shape 8
check "run: --backward with --batch" 2 2 "" "--backward: not with --batch" run --mesh 2 --batch "$dir/mixed.json" --backward
check "run: mesh larger than the job" 2 2 "" "run under 'mpirun -n 4'" run --mesh 2x2 --batch "$dir/mixed.json"
check "run: help names --batch" 0 0 "--batch FILE" "" run --help

echo "cli batch: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
