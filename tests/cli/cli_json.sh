#!/usr/bin/env bash
# Every form of every command's --json, checked against the one table of docs/json.md
# (tests/tools/json_schema.py): "schema": 1, "command", "mesh" first; every key at any depth
# in the table with its type. Usage: cli_json.sh DTR JSON_SCHEMA_PY JSON_MD
set -u
dtr=$1 checker=$2 table=$3
source "$(dirname "$0")/check_lib.sh"
dir=$(mktemp -d) in=$(mktemp -d)
trap 'rm -rf "$dir" "$in" "$out" "$err"' EXIT
cat >"$in/batch.json" <<'JSON'
[{"shape": "8x6", "from": "S(0),R", "to": "R,R"},
 {"shape": "5x3", "dtype": "bf16", "from": "P,P", "to": "R,S(1)"}]
JSON
cat >"$in/batch1.json" <<'JSON'
[{"shape": "8x6", "from": "S(0)", "to": "R"}, {"shape": "5x3", "dtype": "bf16", "from": "P", "to": "S(1)"}]
JSON
forms=0 failed_runs=0
# form NAME RANKS ARGS...: dtr ARGS (under mpirun -n RANKS unless 0) into $dir/NAME
form() {
    local name=$1 n=$2
    shift 2
    forms=$((forms + 1))
    launch_asan "$n"
    if [ "$n" -eq 0 ]; then
        ASAN_OPTIONS=$asan timeout 60 "$dtr" "$@" >"$dir/$name" 2>"$err"
    else
        ASAN_OPTIONS=$asan timeout 120 "${mpirun[@]}" -n "$n" "$dtr" "$@" >"$dir/$name" 2>"$err"
    fi
    local rc=$?
    if [ $rc -ne 0 ]; then
        failed_runs=$((failed_runs + 1))
        echo "FAIL: $name: dtr $* exited $rc: $(head -3 "$err")"
    fi
}
form layout.plain 0 layout --mesh 2x2 --shape 4x5 --placements 'S(0),R' --json
form layout.ranks 0 layout --mesh 4 --ranks 3,2,1,0 --shape 5 --placements 'P(avg)' --dtype bf16 --json
form plan.one 0 plan --mesh 4 --shape 8x8 --from 'S(0)' --to 'S(1)' --json
form plan.cast 0 plan --mesh 2x2 --shape 8x8 --from 'P,S(0)' --to 'R,R' --to-dtype bf16 --json
form plan.nodes 0 plan --mesh 2x2 --shape 8x8 --from 'S(0),S(1)' --to 'R,R' --nodes-of 0 --json
form plan.compare 0 plan --mesh 2x2 --shape 8x8 --from 'S(0),S(0)' --to 'R,S(0)' --compare --json
form plan.refused 0 plan --mesh 2x3x2 --shape 12x4 --from 'S(0),R,S(0)' --to 'R,S(0),S(0)' --compare --json
form plan.seed 0 plan --mesh 2x2x2 --shape 6x4 --from 'S(0),R,S(0)' --to 'R,S(0),S(0)' --strategy compat --json
form plan.backward 0 plan --mesh 2x2 --shape 8x8 --from 'S(0),R' --to 'R,S(1)' --backward --backward-dtype bf16 --json
form plan.batch 0 plan --mesh 2x2 --batch "$in/batch.json" --json
form plan.cross 0 plan --mesh 2x2 --shape 8x8 --from 'S(0),P' --to-mesh 4 --to-ranks 4,5,6,7 --to 'S(1)' --json
form plan.relabel 0 plan --mesh 4 --shape 16x8 --from 'S(0)' --to-mesh 4 --to-ranks 3,2,1,0 --to 'S(0)' --relabel --staging-cap 64 --json
form plan.crossbatch 0 plan --mesh 2 --batch "$in/batch1.json" --to-mesh 2 --to-ranks 2,3 --json
form run.one 4 run --mesh 2x2 --shape 8x8 --from 'S(0),S(1)' --to 'S(1),S(0)' --verify --iters 2 --json
form run.digest 2 run --mesh 2 --shape 8x8 --from 'P' --to 'S(1)' --digest --iters 2 --json
form run.digestbatch 4 run --mesh 2 --batch "$in/batch1.json" --to-mesh 2 --to-ranks 2,3 --digest --iters 2 --json
form run.random 4 run --mesh 2x2 --shape 8x8 --from 'P,S(1)' --to 'R,R' --fill random --verify --backward --iters 2 --json
form run.batch 4 run --mesh 2x2 --batch "$in/batch.json" --verify --iters 2 --json
form run.cross 4 run --mesh 2 --shape 8x8 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to 'S(1)' --verify --iters 2 --json
form run.crossbatch 4 run --mesh 2 --batch "$in/batch1.json" --to-mesh 2 --to-ranks 2,3 --verify --iters 2 --json
form grad.fsdp 4 grad --mode fsdp --mesh 4 --numel 1001 --verify --json
form grad.hsdp 4 grad --mode hsdp --mesh 2x2 --dtype f16 --microbatches 2 --verify --json
form grad.dry 0 grad --dry-run --world 8 --mode hsdp --mesh 2x4 --dtype bf16 --json
form grad.model 2 grad --model gpt2-small --mode ddp --mesh 2 --iters 1 --json
python3 "$checker" "$table" "$dir"/*.* | tee "$out"
line=$(grep -oE '[0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
read -r p f < <(sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 \2/' <<<"${line:-0 passed, 1 failed}")
echo "cli json: $forms forms run; $p passed, $((f + failed_runs)) failed"
[ "$f" -eq 0 ] && [ "$failed_runs" -eq 0 ] && [ "$p" -eq "$forms" ]
