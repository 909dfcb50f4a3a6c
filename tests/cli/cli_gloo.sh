#!/usr/bin/env bash
# `--backend gloo`: the CLI's running commands with no MPI, their ranks started by
# tools/dtr_launch.sh: dtr run in every form (one tensor with random values, reductions,
# --nonblocking and --backward; a batch with an empty tensor; between meshes, disjoint and
# overlapping, one tensor and a batch), dtr grad (ddp, fsdp, hsdp, and --model), dtr reshard
# (a model saved on 2x2 and consolidated, compared byte for byte), each verified element by
# element; and the unhappy paths, each named once: no launcher, --device cuda, a mesh larger
# than the job, --batch with nccl, an unknown backend, the shared-memory path's settings
# differing on one rank.
# Usage: cli_gloo.sh DTR DTR_LAUNCH_SH
set -u
dtr=$1
launcher=$2
here=$(dirname "$0")
source "$here/check_lib.sh"
mpirun=(bash "$launcher") # (check runs "${mpirun[@]}" -n N dtr ...)
w=$(mktemp -d)
trap 'rm -rf "$w" "$out" "$err"' EXIT
seed=${DTR_SEED:-20261129}
echo "seed $seed (DTR_SEED)"

g=(--backend gloo --verify --iters 1 --warmup 0)
check "one tensor, S(0),P -> R,S(1) random f32" 4 0 "4 ranks (gloo backend, cpu buffers)" "" \
    run --mesh 2x2 --shape 33x7 --from 'S(0),P' --to 'R,S(1)' --fill random --seed "$seed" "${g[@]}"
check "one tensor, P(avg) bf16 -> S(0), nonblocking" 3 0 "verified: all" "" \
    run --mesh 3 --shape 10x3 --dtype bf16 --from 'P(avg)' --to 'S(0)' --fill random \
    --seed "$((seed + 1))" --nonblocking "${g[@]}"
check "one tensor, P(max) i32 -> R, backward" 2 0 "backward: gradient" "" \
    run --mesh 2 --shape 5 --dtype i32 --from 'P(max)' --to R --backward "${g[@]}"
check "one tensor, empty dim, --to-dtype" 4 0 "verified: all" "" \
    run --mesh 2x2 --shape 0x9 --from 'S(1),R' --to 'R,R' --to-dtype bf16 "${g[@]}"
cat >"$w/b.json" <<'JSON'
[{"shape": [8, 6], "dtype": "f32", "from": "S(0)", "to": "R"},
 {"shape": [5], "dtype": "bf16", "from": "P", "to": "S(0)"},
 {"shape": [0, 3], "dtype": "i32", "from": "R", "to": "S(1)"},
 {"shape": [1], "dtype": "u8", "from": "R", "to": "S(0)"}]
JSON
check "a batch of 4, one empty" 2 0 "verified: yes" "" \
    run --mesh 2 --batch "$w/b.json" "${g[@]}"
check "between meshes, disjoint" 4 0 "verified: all" "" \
    run --mesh 2 --ranks 0,1 --shape 16x5 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to 'S(1)' \
    --fill random --seed "$seed" "${g[@]}"
check "between meshes, a batch, overlapping, --staging-cap" 3 0 "verified: all" "" \
    run --mesh 2 --batch "$w/b.json" --to-mesh 3 --staging-cap 64 "${g[@]}"
for mode in ddp fsdp hsdp; do
    mesh=4
    [ "$mode" = hsdp ] && mesh=2x2
    check "grad --mode $mode" 4 0 "verified: every element" "" \
        grad --mode $mode --mesh $mesh --numel 1001 --dtype bf16 --backend gloo --verify --iters 1
done
cat >"$w/model.json" <<'JSON'
[{"shape": [64, 33], "group": "a"}, {"shape": [7], "group": "a"}, {"shape": [0], "group": "b"}]
JSON
check "grad --model" 2 0 "verified" "" \
    grad --mode fsdp --model "$w/model.json" --mesh 2 --backend gloo --verify --iters 1

# reshard: saved on 2x2 (4 processes), consolidated on 3, equal to the original
python3 "$here/st_model.py" write "$w/m.safetensors" "$seed" >/dev/null
echo '[{"match": "step", "placements": "R,R"}, {"match": "*", "placements": "S(0),R"}]' >"$w/r.json"
check "reshard to 2x2" 4 0 "dtr reshard:" "" \
    reshard --from "$w/m.safetensors" --to "$w/s" --mesh 2x2 --rules "$w/r.json" --backend gloo
check "reshard --consolidate on 3" 3 0 "consolidated" "" \
    reshard --from "$w/s" --to "$w/one" --consolidate --backend gloo
if python3 "$here/st_model.py" compare "$w/m.safetensors" "$w/one" >"$w/cmp" 2>&1; then
    pass=$((pass + 1))
    echo "ok: reshard over gloo: $(head -1 "$w/cmp")"
else
    fail=$((fail + 1))
    echo "FAIL: reshard over gloo: $(head -3 "$w/cmp")"
fi

# The unhappy paths: one line each, the exit code of its class.
check "no launcher" 0 2 "" "dtr run: --backend gloo: dtr_context_create_gloo_env: WORLD_SIZE is not set" \
    run --mesh 2 --shape 4 --from R --to 'S(0)' --backend gloo
check "--device cuda" 2 2 "" "dtr run: --backend gloo: runs on CPU buffers only (--device cpu)" \
    run --mesh 2 --shape 4 --from R --to 'S(0)' --backend gloo --device cuda
check "a mesh larger than the job" 2 2 "" "the mesh uses ranks up to 3 and the job has 2: run under 'dtr_launch.sh -n 4'" \
    run --mesh 4 --shape 4 --from R --to 'S(0)' --backend gloo
check "--batch with nccl" 0 2 "" "dtr run: --backend: 'nccl' is not mpi or gloo (--batch runs on CPU buffers)" \
    run --mesh 1 --batch "$w/b.json" --backend nccl
check "reshard, an unknown backend" 0 2 "" "dtr reshard: --backend: 'tcp' is not mpi or gloo" \
    reshard --from "$w/m.safetensors" --to "$w/x" --consolidate --backend tcp
export WORLD_SIZE=1 RANK=0 DTR_GLOO_STORE=$w/none
check "a store that is not a directory" 0 2 "" \
    "dtr run: --backend gloo: dtr_context_create_gloo_env: DTR_GLOO_STORE: '$w/none' is not a directory" \
    run --mesh 1 --shape 4 --from R --to R --backend gloo
unset WORLD_SIZE RANK DTR_GLOO_STORE
check "--buffers shared" 2 2 "" "dtr run: --buffers shared: the MPI backend on CPU buffers only" \
    run --mesh 2 --shape 4 --from R --to 'S(0)' --backend gloo --buffers shared
check "the report names the backend between meshes" 2 0 "2 ranks (gloo backend, cpu buffers)" "" \
    run --mesh 1 --to-mesh 1 --to-ranks 1 --shape 4 --from R --to R --backend gloo --iters 0
check "the JSON names the backend: a batch" 2 0 '"backend":"gloo","batch":' "" \
    run --mesh 2 --batch "$w/b.json" --backend gloo --iters 0 --json
check "the JSON names the backend: between meshes" 2 0 '"to_mesh":[1],"backend":"gloo"' "" \
    run --mesh 1 --to-mesh 1 --to-ranks 1 --shape 4 --from R --to R --backend gloo --iters 0 --json
check "grad, no launcher" 0 2 "" "dtr grad: --backend gloo: dtr_context_create_gloo_env: WORLD_SIZE is not set" \
    grad --mode ddp --mesh 2 --backend gloo

# The shared-memory path's settings differ on one rank: every rank fails at its first
# collective naming the variable (the segment would be read with another geometry, or not at
# all), none waits for the others (the launcher stops the rest once one has exited, so some
# may not get to print).
for setting in "1 DTR_GLOO_SHM_CHUNK=64" "0 DTR_GLOO_SHM=0" "2 DTR_GLOO_SHM_RING=8192"; do
    rank=${setting%% *} var=${setting#* }
    wrap=$(mktemp)
    printf '%s\n' '#!/bin/bash' "if [ \"\$RANK\" = $rank ]; then export $var; fi" \
        "exec \"$dtr\" \"\$@\"" >"$wrap"
    chmod +x "$wrap"
    timeout 60 bash "$launcher" -n 3 "$wrap" run --mesh 3 --shape 8x8 --from 'S(0)' --to R \
        --backend gloo >"$out" 2>"$err"
    rc=$?
    want="${var%%=*} differs between the group's members"
    if [ "$rc" -eq 1 ] && [ "$(grep -c "$want" "$err")" -ge 1 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $var on rank $rank alone (exit $rc, want 1 and '$want')"
        head -5 "$err"
    fi
    rm -f "$wrap"
done

echo "cli_gloo: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
