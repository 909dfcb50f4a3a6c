#!/usr/bin/env bash
# `dtr run` under mpirun: verified runs (JSON keys, text, every dtype, bystanders,
# non-blocking, compat), a verification failure (--inject-mismatch) and the usage errors
# (one stderr line from rank 0 only, exit 2).
# Usage: cli_run.sh DTR
set -u
# The MPI launcher: Open MPI's by default; --config=mpich sets DTR_MPIRUN=mpirun.mpich.
read -r -a mpirun <<<"${DTR_MPIRUN:-mpirun --oversubscribe}"
dtr=$1
source "$(dirname "$0")/check_lib.sh"

check "JSON keys" 4 0 '"verified":true,"mismatches":0,' "" \
    run --mesh 2x2 --shape 64x64 --from 'S(0),R' --to 'R,S(1)' --verify --json --iters 3
for key in '"median_us":' '"baseline_median_us":' '"recv_bytes_per_rank_max":4096' \
    '"collectives":{"all_gather":' '"input_intact":true'; do
    check "JSON has $key" 4 0 "$key" "" \
        run --mesh 2x2 --shape 64x64 --from 'S(0),R' --to 'R,S(1)' --verify --json --iters 3
done
check "text summary" 4 0 "verified: all 8192 elements on every rank match exactly; inputs intact" "" \
    run --mesh 2x2 --shape 64x64 --from 'S(0),R' --to 'R,S(1)' --verify --iters 2
# every group of a one-node job has its segment: mesh dim 0's two, mesh dim 1's two, the
# whole mesh's (the agreement); all 34 operations of 5 iterations and their baselines
check "groups on one node, through shared memory" 4 0 \
    "groups: 5 on one node, through shared memory (34 operations; 0 through MPI), 0 across nodes (0 operations through MPI, 0 hierarchical)" "" \
    run --mesh 2x2 --shape 64x64 --from 'S(0),R' --to 'R,S(1)' --verify --iters 5
check "JSON groups" 4 0 '"groups":{"shared_memory":5,"shm_ops":34,"mpi_ops":0,"mpi_only":0,"mpi_only_ops":0,"hier_ops":0,"direct_ops":0}' "" \
    run --mesh 2x2 --shape 64x64 --from 'S(0),R' --to 'R,S(1)' --verify --iters 5 --json
check "one node: no mesh dim crosses nodes, planned as on one node" 4 0 \
    '"mesh_dims_across_nodes":[],"mesh_dims_planned_across_nodes":[],"steps_across_nodes":0,"node_aware":false' "" \
    run --mesh 2x2 --shape 64x64 --from 'S(0),R' --to 'R,S(1)' --verify --iters 1 --json
check "--nodes-of 0: planned node-aware" 4 0 "verified: all 4096 elements on every rank match exactly" "" \
    run --mesh 2x2 --shape 64x64 --from 'R,S(0)' --to 'S(0),S(0)' --verify --iters 1 --nodes-of 0
# --nodes-of on one node: the plan took dim 0 as crossing nodes, the job's ranks do not
check "--nodes-of 0 on one node: said in text" 4 0 \
    "nodes: planned with mesh dim 0 crossing nodes (--nodes-of); this job's ranks are all on one node, so no group crosses one" "" \
    run --mesh 2x2 --shape 8x8 --from 'S(0),R' --to R,R --iters 1 --nodes-of 0
check "--nodes-of 0 on one node: said in JSON" 4 0 \
    '"mesh_dims_across_nodes":[],"mesh_dims_planned_across_nodes":[0],"steps_across_nodes":0,"node_aware":true' "" \
    run --mesh 2x2 --shape 8x8 --from 'S(0),R' --to R,R --iters 1 --nodes-of 0 --json
check "--nodes-of: not a mesh dim" 4 2 "" \
    'dtr run: --nodes-of: dtr_mesh_dims_parse: "5": item 0 is not a mesh dim of a 2-d mesh (0..1)' \
    run --mesh 2x2 --shape 8x8 --from 'S(0),R' --to R,R --nodes-of 5
# (under AddressSanitizer its allocator returns NULL as malloc does only when told to)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:allocator_may_return_null=1} \
    check "run out of memory: named once, with the bytes" 2 1 "" \
    "dtr run: ranks 0-1: buffers: out of memory for 8796093022211 bytes (the source block twice, the target block once)" \
    run --mesh 2 --shape 1048576x1048576 --from 'S(0)' --to R --iters 0
check "--buffers: not private or shared" 2 2 "" \
    "dtr run: --buffers: 'bogus' is not private or shared" \
    run --mesh 2 --shape 4x4 --from P --to R --buffers bogus
check "overhead ratio printed" 4 0 "overhead ratio" "" \
    run --mesh 4 --shape 64x64 --from 'P' --to 'S(1)' --iters 2
for dt in f32 f64 f16 bf16 i32 i64 u8; do
    check "P(sum) -> S(1) in $dt" 4 0 '"verified":true' "" \
        run --mesh 2x2 --shape 9x7 --from 'P,S(0)' --to 'S(1),R' --dtype $dt --verify --json --iters 1
done
for dt in c64 c128; do
    check "P(sum) -> S(1) in $dt (parts reduced)" 4 0 '"verified":true' "" \
        run --mesh 2x2 --shape 9x7 --from 'P,S(0)' --to 'S(1),R' --dtype $dt --verify --json --iters 1
    check "P(avg) -> R and back in $dt, random" 4 0 '"verified":true' "" \
        run --mesh 4 --shape 13x3 --from 'P(avg)' --to 'R' --dtype $dt --fill random --backward --verify --json --iters 1
done
check "R -> P(sum) in c64 divides both parts" 4 0 '"verified":true' "" \
    run --mesh 2x2 --shape 5x3 --from 'R,S(1)' --to 'P,S(1)' --dtype c64 --verify --json --iters 1
# Shard orders: an uneven tp-first source, zero-filled, and its gradient back into the order
check "shard order, uneven, zero fill and backward" 8 0 '"verified":true' "" \
    run --mesh 2x4 --shape 13x5 --from 'S(0)[1],S(0)[0]' --to 'S(0),P' --fill random --backward --verify --json --iters 1
check "_StridedShard in, shard order out" 8 0 '"to":"S(0)[1],S(0)[0]"' "" \
    run --mesh 2x4 --shape 17x3 --from 'R,R' --to '_S(0, 4),S(0)' --backward --verify --json --iters 1
# --to-dtype: cast first, checked against each source value rounded to the target dtype
check "cast f32 -> bf16, reduced, random, and the gradient back in f32" 4 0 '"to_dtype":"bf16"' "" \
    run --mesh 2x2 --shape 9x7 --from 'P,S(0)' --to 'S(1),R' --to-dtype bf16 --fill random --backward --verify --json --iters 1
check "cast c64 -> c128" 4 0 '"verified":true' "" \
    run --mesh 4 --shape 13x3 --from 'P' --to 'S(0)' --dtype c64 --to-dtype c128 --fill random --verify --json --iters 1
check "cast to an integer refused" 4 3 "" "dst: dtype i32 from src's f32: a redistribution casts between float dtypes" \
    run --mesh 4 --shape 8 --from 'S(0)' --to 'R' --to-dtype i32
# S -> P(sum): zeros outside the kept chunks, checked element by element (pattern.c)
for dt in i32 c64 f8e4m3; do
    check "S(0),S(0) -> R,P(sum) in $dt: zero fill, then gather" 4 0 '"verified":true' "" \
        run --mesh 2x2 --shape 7x3 --from 'S(0),S(0)' --to 'R,P' --dtype $dt --verify --json --iters 1
done
check "S(0),S(0) -> P(sum),S(0): gather behind, zero fill, chunk" 4 0 '"verified":true' "" \
    run --mesh 2x2 --shape 9x2 --from 'S(0),S(0)' --to 'P,S(0)' --verify --json --iters 1 --backward
check "P,S(0) -> R,P: reduce first, zero fill last" 4 0 '"verified":true' "" \
    run --mesh 2x2 --shape 9x2 --from 'P,S(0)' --to 'R,P' --verify --json --iters 1 --fill random
for dt in f8e4m3 f8e5m2; do
    check "S -> R in $dt (storage only)" 4 0 '"verified":true' "" \
        run --mesh 2x2 --shape 9x7 --from 'S(0),S(1)' --to 'R,S(0)' --dtype $dt --verify --json --iters 1
done
check "P(avg) in bf16 through SUM then divide" 4 0 '"verified":true' "" \
    run --mesh 4 --shape 13x3 --from 'P(avg)' --to 'R' --dtype bf16 --verify --json --iters 1
check "R -> P(sum) divides (tolerance of one rounding)" 4 0 '"verified":true' "" \
    run --mesh 2x2 --shape 5x3 --from 'R,S(1)' --to 'P,S(1)' --dtype f32 --verify --json --iters 1
check "bystander: 5 ranks, a 2x2 mesh" 5 0 '"verified":true' "" \
    run --mesh 2x2 --shape 8x3 --from 'S(0),S(0)' --to 'R,S(1)' --verify --json --iters 1
check "explicit ranks" 4 0 '"verified":true' "" \
    run --mesh 2x2 --ranks 3,1,0,2 --shape 8x3 --from 'S(0),S(1)' --to 'S(1),S(0)' --verify --json --iters 1
check "non-blocking" 4 0 '"verified":true' "" \
    run --mesh 2x2 --shape 33x5 --from 'S(1),P' --to 'R,S(0)' --nonblocking --verify --json --iters 1
# Gathers along a non-leading dim into outputs of 8 MiB and more run in slices (even pieces
# only with the MPI backend's shared-memory gather off), written with streaming stores:
# uneven pieces (gatherv) at odd byte offsets, even pieces with one outer row larger than a
# slice (slices within a row), and slicing turned off; and the shared-memory gather in place.
check "sliced gather, uneven, f16, 8.4 MB out" 4 0 '"verified":true' "" \
    run --mesh 4 --shape 4096x1030 --from 'S(1)' --to 'R' --dtype f16 --verify --json --iters 2
check "sliced gather, uneven, u8, odd offsets" 2 0 '"verified":true' "" \
    run --mesh 2 --shape 8193x1025 --from 'S(1)' --to 'R' --dtype u8 --verify --json --iters 2
DTR_MPI_SHM_GATHER=0 check "sliced gather, slices within a row" 4 0 '"verified":true' "" \
    run --mesh 4 --shape 4x1048576 --from 'S(1)' --to 'R' --verify --json --iters 2
check "shared-memory gather in place, 2 rows of 4 MiB" 4 0 '"verified":true' "" \
    run --mesh 4 --shape 2x1048576 --from 'S(1)' --to 'R' --verify --json --iters 2
# Strided all-to-all into outputs of 8 MiB and more: the own piece is written with streaming
# stores (rows at odd byte offsets; a 3-d tensor whose split and gathered dims are apart),
# the other members' pieces through the backend.
check "strided all-to-all, f16, rows of odd bytes, 8.4 MB out" 2 0 '"verified":true' "" \
    run --mesh 2 --shape 4098x2050 --from 'S(0)' --to 'S(1)' --dtype f16 --verify --json --iters 2
check "strided all-to-all, 3-d, S(2) -> S(0), 8.9 MB out" 4 0 '"verified":true' "" \
    run --mesh 4 --shape 256x17x2048 --from 'S(2)' --to 'S(0)' --verify --json --iters 2
DTR_SLICE_BYTES=0 check "DTR_SLICE_BYTES=0: no slices" 4 0 '"verified":true' "" \
    run --mesh 2x2 --shape 4096x1030 --from 'S(0),S(1)' --to 'R,R' --dtype f16 --verify --json --iters 2
DTR_SLICE_BYTES=7 DTR_MPI_SHM_GATHER=0 check "DTR_SLICE_BYTES=7: many slices" 4 0 '"verified":true' "" \
    run --mesh 2x2 --shape 33x70 --from 'S(0),S(1)' --to 'R,R' --dtype bf16 --verify --json --iters 2
# a bad DTR_SLICE_BYTES fails every rank's context alike: exit 1, named once for both ranks
DTR_SLICE_BYTES=lots timeout 120 "${mpirun[@]}" -n 2 "$dtr" run --mesh 2 --shape 8x8 \
    --from 'S(1)' --to 'R' >"$out" 2>"$err"
rc=$?
if [ $rc -eq 1 ] && [ "$(grep -c '^dtr run: ranks 0-1: context: dtr_context_create: DTR_SLICE_BYTES: "lots" is not a byte count >= 0' "$err")" -eq 1 ] &&
    [ "$(grep -c '^dtr ' "$err")" -eq 1 ]; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: DTR_SLICE_BYTES not a number (exit $rc, want 1 and the error once for both ranks)"
    head -5 "$err"
fi
# bad shared-memory sizes fail every rank's context alike, naming the variable and the range
for bad in 'DTR_MPI_SHM_RING=1000:DTR_MPI_SHM_RING: "1000" is not a byte count from 4 KiB to 1 GiB' \
    'DTR_MPI_SHM_RING=2GiB:DTR_MPI_SHM_RING: "2GiB" is not a byte count from 4 KiB to 1 GiB' \
    'DTR_MPI_SHM_CHUNK=0:DTR_MPI_SHM_CHUNK: "0" is not a byte count from 1 to 16 MiB'; do
    env "${bad%%:*}" timeout 120 "${mpirun[@]}" -n 2 "$dtr" run --mesh 2 --shape 8x8 \
        --from P --to R >"$out" 2>"$err"
    rc=$?
    if [ $rc -eq 1 ] && [ "$(grep -cF "dtr run: ranks 0-1: context: dtr_backend_mpi_state_create: ${bad#*:}" "$err")" -eq 1 ] &&
        [ "$(grep -c '^dtr ' "$err")" -eq 1 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: ${bad%%:*} (exit $rc, want 1 and the error once for both ranks)"
        head -5 "$err"
    fi
done
check "compat" 4 0 '"strategy":"compat"' "" \
    run --mesh 4 --shape 8x8 --from 'S(0)' --to 'S(1)' --strategy compat --verify --json --iters 1
# --backward-dtype: the gradient's steps in bf16, each value checked rounded through it
check "backward_dtype bf16: a move, exact through bf16" 4 0 \
    '"backward_result":{"placements":["S(0)","R"],"verified":true,"mismatches":0,"checked":108,"nsteps":1,"collectives":{"all_gather":0,"reduce_scatter":0,"all_reduce":0,"all_to_all":0,"exchange":0,"reduce_exchange":0},"tolerance":{"exact":true,"factor":0,"u":0.00390625,"scale":"none","worst_u":0},"op_dtype":"bf16"}' "" \
    run --mesh 2x2 --shape 9x6 --from 'S(0),R' --to 'R,R' --fill random --backward --backward-dtype bf16 --verify --json --iters 1
check "backward_dtype bf16: a reduction within bf16's rounding" 4 0 \
    'backward: gradient P(sum),P(sum) -> S(0),S(1), 2 steps in bf16; verified: all' "" \
    run --mesh 2x2 --shape 8x6 --from 'S(0),S(1)' --to 'P,P' --fill random --backward --backward-dtype bf16 --verify --iters 1
check "backward_dtype c128 for a c64 input" 4 0 '"op_dtype":"c128"}' "" \
    run --mesh 4 --shape 13x3 --from 'S(0)' --to 'P' --dtype c64 --fill random --backward --backward-dtype c128 --verify --json --iters 1
check "backward_dtype: only with --backward" 0 2 "" "dtr run: --backward-dtype: only with --backward" \
    run --mesh 4 --shape 8 --from R --to R --backward-dtype bf16
check "backward: a Partial source gets a Replicate gradient" 4 0 \
    '"backward_result":{"placements":["R","S(0)"],"verified":true,"mismatches":0,"checked":96,"nsteps":1,' "" \
    run --mesh 2x2 --shape 8x6 --from 'P,S(0)' --to 'R,S(1)' --backward --verify --json --iters 1
check "backward: a Partial gradient is reduced" 4 0 \
    '"backward_result":{"placements":["R","S(0)"],"verified":true,"mismatches":0,"checked":96,"nsteps":2,"collectives":{"all_gather":0,"reduce_scatter":0,"all_reduce":1,"all_to_all":1,"exchange":0,"reduce_exchange":0},"tolerance":{"exact":true,' "" \
    run --mesh 2x2 --shape 8x6 --from 'R,S(0)' --to 'P(max),S(1)' --backward --verify --json --iters 1
check "backward text" 4 0 "backward: gradient R,S(1) -> R,S(0), 1 step; verified: all 96 elements match" "" \
    run --mesh 2x2 --shape 8x6 --from 'P,S(0)' --to 'R,S(1)' --backward --verify --iters 1
check "a mismatch fails verification, naming the rank and index" 4 1 "" \
    "verification failed: 1 of 12 elements wrong; first on rank 1 at local index 2" \
    run --mesh 4 --shape 12 --from 'R' --to 'S(0)' --verify --inject-mismatch 1 --iters 1
check "a mesh larger than the job" 2 2 "" \
    "dtr run: --mesh: the mesh uses ranks up to 3 and the job has 2: run under 'mpirun -n 4'" \
    run --mesh 2x2 --shape 8 --from 'S(0),R' --to 'R,R'
check "bad --to" 4 2 "" "dtr run: --to:" \
    run --mesh 2x2 --shape 8 --from 'S(0),R' --to 'S(0),Q'
check "S -> P(max) refused" 4 3 "" "a Shard becomes Partial only as P(sum)" \
    run --mesh 4 --shape 8 --from 'S(0)' --to 'P(max)'
check "compat's seed plan that misplaces data refused" 12 3 "" \
    "for this shape the rank at mesh coordinate (0,0,1) ends with elements 3..4 of tensor dim 0 where the target places 2..3 there" \
    run --mesh 2x3x2 --shape 12x4 --from 'S(0),R,S(0)' --to 'R,S(0),S(0)' --strategy compat
# The same seed plan on shapes where every element lands right (its gather works on tensor
# dim 0 while mesh dim 2 still shards it): compat runs it, forward and backward, uneven too.
check "compat runs a misaligned seed plan that lands right (uneven, with P(sum))" 12 0 \
    '"verified":true' "" \
    run --mesh 2x2x3 --shape 11x3 --from 'S(0),P(sum),S(0)' --to 'R,S(0),S(0)' --strategy compat \
    --dtype f64 --verify --backward --json --iters 1
check "bad --iters" 4 2 "" "dtr run: --iters: 'x' is not a count" \
    run --mesh 4 --shape 8 --from 'S(0)' --to 'R' --iters x
check "bad --inject-mismatch" 4 2 "" "--inject-mismatch: '9' is not a rank 0..3" \
    run --mesh 4 --shape 8 --from 'S(0)' --to 'R' --inject-mismatch 9
check "unknown option" 4 2 "" "dtr run:" \
    run --mesh 4 --shape 8 --from 'S(0)' --to 'R' --frobnicate
# --dump: the raw buffers. S(0) -> R on 4 ranks: the sources side by side are the result
# every rank holds; the backward (R -> S(0)) cuts the gradient back into those pieces.
dump=$(mktemp -d)
trap 'rm -rf "$out" "$err" "$dump"' EXIT
check "--dump writes every rank's buffers" 4 0 '"verified":true' "" \
    run --mesh 4 --shape 12x2 --from 'S(0)' --to 'R' --backward --verify --json --iters 0 \
    --dump "$dump"
dump_ok=1
for r in 0 1 2 3; do
    for f in in:24 out:96 grad_in:96 grad_out:24; do
        [ "$(stat -c %s "$dump/rank$r.${f%%:*}" 2>/dev/null)" = "${f#*:}" ] || dump_ok=0
    done
    cmp -s "$dump/rank0.out" "$dump/rank$r.out" || dump_ok=0
done
cat "$dump"/rank{0,1,2,3}.in | cmp -s - "$dump/rank0.out" || dump_ok=0
cat "$dump"/rank{0,1,2,3}.grad_out | cmp -s - "$dump/rank0.grad_in" || dump_ok=0
cmp -s "$dump/rank0.in" "$dump/rank1.in" && dump_ok=0 # the pieces differ
if [ $dump_ok -eq 1 ]; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL: --dump files (sizes, or pieces that do not make the result)"
    ls -l "$dump"
fi
check "--dump into a missing directory" 4 2 "" \
    "dtr run: --dump: '$dump/none' is not an existing directory" \
    run --mesh 4 --shape 8 --from 'S(0)' --to 'R' --dump "$dump/none"
rm -f "$dump"/* && mkdir "$dump/rank2.out"
check "--dump: a rank that cannot write says which file" 4 1 "" \
    "dtr run: rank 2: --dump: cannot write '$dump/rank2.out': Is a directory" \
    run --mesh 4 --shape 8 --from 'S(0)' --to 'R' --dump "$dump" --iters 0
check "bad --backend" 2 2 "" "dtr run: --backend: 'ucx' is not mpi, gloo or nccl" \
    run --mesh 2 --shape 8 --from 'S(0)' --to 'R' --backend ucx
check "bad --device" 2 2 "" "dtr run: --device: 'tpu' is not cpu or cuda" \
    run --mesh 2 --shape 8 --from 'S(0)' --to 'R' --device tpu
check "nccl on cpu buffers" 2 2 "" "dtr run: --backend nccl: runs on GPU buffers only" \
    run --mesh 2 --shape 8 --from 'S(0)' --to 'R' --backend nccl --device cpu
check "--device cpu is the MPI path" 2 0 '"backend":"mpi","device":"cpu"' "" \
    run --mesh 2 --shape 8x3 --from 'S(0)' --to 'S(1)' --device cpu --verify --json --iters 1
gpu_check "nccl, world size 1" 1 run --mesh 1 --shape 64x33 --from 'S(1)' --to 'R' \
    --backend nccl --verify --json --iters 2
gpu_check "shared GPU, 2 ranks" 2 run --mesh 2 --shape 64x33 --from 'S(0)' --to 'S(1)' \
    --device cuda --verify --json --iters 2
gpu_check "shared GPU, 4 ranks, P(avg) bf16 with backward" 4 run --mesh 2x2 --shape 9x70 \
    --from 'P(avg),S(1)' --to 'S(1),R' --dtype bf16 --device cuda --backward --verify --json \
    --iters 2
# Between meshes (docs/cross-mesh.md): the issue's refit on 8 ranks, disjoint sets; a reshape
# of the same ranks in another order; overlapping sets with a cast; the refusals
check "cross: refit 2x2 S(0),P -> 4 S(1) on other ranks" 8 0 \
    "verified: all 1024000 elements on every destination rank match; every source rank's input intact" "" \
    run --mesh 2x2 --ranks 0,1,2,3 --from 'S(0),P' --to-mesh 4 --to-ranks 4,5,6,7 --to 'S(1)' \
    --shape 1024x1000 --verify --iters 2
check "cross: the refit's figures at the bounds" 8 0 \
    '"messages":8,"recv_bytes_per_rank_max":1024000,"send_bytes_per_rank_max":1024000,"lower_bound_recv_bytes_per_rank":1024000,"lower_bound_send_bytes_per_rank":1024000,' "" \
    run --mesh 2x2 --ranks 0,1,2,3 --from 'S(0),P' --to-mesh 4 --to-ranks 4,5,6,7 --to 'S(1)' \
    --shape 1024x1000 --verify --json --iters 1
check "cross: 2x3 -> 3x2 in reverse rank order, c64, random, uneven" 6 0 \
    "verified: all 1122 elements on every destination rank match" "" \
    run --mesh 2x3 --from 'S(1),S(0)' --to-mesh 3x2 --to-ranks 5,4,3,2,1,0 --to 'S(0),S(1)' \
    --shape 33x17 --dtype c64 --fill random --verify --iters 1
check "cross: overlapping sets, P(max) reduced first, bf16, a bystander" 5 0 \
    '"verified":true,"mismatches":0,"checked":35,"input_intact":true,"fill":"random","seed":1,' "" \
    run --mesh 2x2 --ranks 4,3,2,1 --from 'P(max),S(1)' --to-mesh 3 --to-ranks 0,2,4 --to 'S(0)' \
    --shape 7x5 --dtype bf16 --fill random --verify --json --iters 1
check "cross: a Partial summed at the receivers, said" 4 0 \
    "  the 2 addends summed at the receivers, then 2 messages between ranks in 1 round; most bytes one rank sends 64 (lower bound 64), receives 64 (lower bound 64)" "" \
    run --mesh 2x2 --from 'R,P' --to-mesh 2 --to-ranks 0,2 --to 'S(0)' --shape 8x4 --verify --iters 1
DTR_CROSS_REDUCE=source check "cross: the same reduced on the source mesh, verified" 4 0 \
    "verified: all 32 elements on every destination rank match; every source rank's input intact" "" \
    run --mesh 2x2 --from 'R,P' --to-mesh 2 --to-ranks 0,2 --to 'S(0)' --shape 8x4 --verify --iters 1
check "cross: f32 -> f16 on the same 4 ranks" 4 0 '"to_dtype":"f16","from":"S(0)","to":"R,S(1)"' "" \
    run --mesh 4 --from 'S(0)' --to-mesh 2x2 --to 'R,S(1)' --to-dtype f16 --shape 10x6 --verify --json --iters 1
check "cross: a mismatch names the rank and index" 4 1 "" \
    "dtr run: verification failed: 1 of 1920 elements wrong; first on rank 1 at local index 511: got 1.32348898e-22, want 10" \
    run --mesh 2x2 --from 'S(0),S(1)' --to-mesh 4 --to-ranks 3,2,1,0 --to 'S(1)' --shape 64x30 \
    --verify --inject-mismatch 1 --iters 1
check "cross: a destination mesh larger than the job" 4 2 "" \
    "dtr run: --to-mesh: the mesh uses ranks up to 7 and the job has 4: run under 'mpirun -n 8'" \
    run --mesh 4 --from 'S(0)' --to-mesh 2x4 --to 'S(1),R' --shape 8x8
check "cross: --nonblocking, rounds under a staging cap, P(sum) reduced first" 4 0 '"verified":true' "" \
    run --mesh 4 --from 'P' --to-mesh 2 --to-ranks 1,2 --to R --shape 8x8 --nonblocking \
    --staging-cap 64 --verify --json --iters 1
check "cross: not --backward yet" 4 2 "" \
    "dtr run: --backward: not with --to-mesh yet (docs/cross-mesh.md" \
    run --mesh 4 --from 'S(0)' --to-mesh 2 --to-ranks 1,2 --to R --shape 8x8 --backward
check "cross: a fill the pattern refuses exits 3, as within one mesh" 2 3 "" \
    "dtr run: ranks 0-1: fill: dtr_fill: spec: mesh dims 0 and 1 are Partial with different ops" \
    run --mesh 1x2 --shape 1x2 --from 'P(sum),P(avg)' --to-mesh 1x2 --to R,R --iters 0
check "cross: not --nodes-of yet" 4 2 "" \
    "dtr run: --nodes-of: not with --to-mesh yet (docs/cross-mesh.md" \
    run --mesh 4 --from 'S(0)' --to-mesh 2 --to-ranks 1,2 --to R --shape 8x8 --nodes-of 0
# out of memory between meshes names the bytes, as within one mesh (it said "fill: " with an
# empty or stale error)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:allocator_may_return_null=1} \
    check "cross: out of memory, named once, with the bytes" 2 1 "" \
    "dtr run: ranks 0-1: buffers: out of memory for 6000000000003 bytes (a tensor's source block twice, its target block once)" \
    run --mesh 2 --to-mesh 2 --shape 1000000x1000000 --from 'S(0)' --to 'S(1)' --iters 0
# --dump between meshes: sources write rankR.in, destinations rankR.out; the blocks put
# together give the same tensor both ways (rows of S(0) on ranks 0,1; columns of S(1) on 3,2)
mkdir -p "$dump/xd"
echo '[{"shape": "8x6", "from": "S(0)", "to": "R"}]' >"$dump/b.json"
check "cross: --dump" 4 0 '"verified":true' "" \
    run --mesh 2 --ranks 0,1 --from 'S(0)' --to-mesh 2 --to-ranks 3,2 --to 'S(1)' --shape 8x6 \
    --verify --json --iters 0 --dump "$dump/xd"
if python3 - "$dump/xd" <<'PY'; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: cross: --dump's files"; fi
import os, struct, sys
d = sys.argv[1]
def rows(path, ncols):
    raw = open(path, "rb").read()
    v = struct.unpack(f"<{len(raw) // 4}f", raw)
    return [list(v[i:i + ncols]) for i in range(0, len(v), ncols)]
assert sorted(os.listdir(d)) == ["rank0.in", "rank1.in", "rank2.out", "rank3.out"], os.listdir(d)
full = rows(f"{d}/rank0.in", 6) + rows(f"{d}/rank1.in", 6)
left, right = rows(f"{d}/rank3.out", 3), rows(f"{d}/rank2.out", 3)
assert len(full) == 8 and [a + b for a, b in zip(left, right)] == full
PY
# --dump with --batch: rankR.K.in and rankR.K.out for tensor K, within one mesh and between
# two; tensor 1 (S(0) -> R) out on every destination rank is the sources side by side, and
# tensor 0 (R -> S(1)) out is a column block of its source
cat >"$dump/b2.json" <<'JSON'
[{"shape": "4x6", "from": "R", "to": "S(1)"},
 {"shape": "8x3", "dtype": "f64", "from": "S(0)", "to": "R"}]
JSON
check "--dump with --batch into a missing directory" 2 2 "" \
    "dtr run: --dump: '$dump/none' is not an existing directory" \
    run --mesh 2 --batch "$dump/b2.json" --dump "$dump/none"
for form in "one mesh:--mesh 2" "between meshes:--mesh 2 --to-mesh 2 --to-ranks 3,2"; do
    rm -rf "$dump/bd" && mkdir -p "$dump/bd"
    # shellcheck disable=SC2086
    check "--dump with --batch, ${form%%:*}" 4 0 '"verified":true' "" \
        run ${form#*:} --batch "$dump/b2.json" --verify --json --iters 0 --dump "$dump/bd"
    if python3 - "$dump/bd" "${form%%:*}" <<'PY'; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: --dump with --batch, ${form%%:*}: the files"; fi
import os, struct, sys
d, form = sys.argv[1], sys.argv[2]
def vals(path, fmt):
    raw = open(path, "rb").read()
    return list(struct.unpack(f"<{len(raw) // struct.calcsize(fmt)}{fmt}", raw))
srcs, dsts = ([0, 1], [0, 1]) if form == "one mesh" else ([0, 1], [3, 2])
want = sorted([f"rank{r}.{k}.in" for r in srcs for k in (0, 1)] +
              [f"rank{r}.{k}.out" for r in dsts for k in (0, 1)])
assert sorted(os.listdir(d)) == want, (sorted(os.listdir(d)), want)
full = vals(f"{d}/rank{srcs[0]}.1.in", "d") + vals(f"{d}/rank{srcs[1]}.1.in", "d")
assert len(full) == 24 and all(vals(f"{d}/rank{r}.1.out", "d") == full for r in dsts)
src0 = vals(f"{d}/rank{srcs[0]}.0.in", "f")
for i, r in enumerate(dsts):  # column block i of the 4x6 source
    got = vals(f"{d}/rank{r}.0.out", "f")
    assert got == [src0[row * 6 + i * 3 + c] for row in range(4) for c in range(3)], (r, got)
PY
done
check "cross: a Partial destination" 4 3 "" \
    "dtr run: --to-mesh: dtr_change_create: dst: placements[0] is P(sum)" \
    run --mesh 4 --from 'S(0)' --to-mesh 2 --to-ranks 1,2 --to P --shape 8x8
check "cross: relabeled, a pure permutation, verified" 6 0 \
    "  relabeled: the destination mesh's ranks by coordinate 0,3,1,4,2,5, 2244 bytes kept from moving (a pure permutation: nothing moves)" "" \
    run --mesh 2x3 --from 'S(1),S(0)' --to-mesh 3x2 --to-ranks 5,4,3,2,1,0 --to 'S(0),S(1)' \
    --shape 33x17 --relabel --verify --iters 1
check "cross: under a staging cap of 64 KiB, 16 rounds" 8 0 \
    "then 128 messages between ranks in 16 rounds; most bytes one rank sends 1024000 (lower bound 1024000)" "" \
    run --mesh 2x2 --ranks 0,1,2,3 --from 'S(0),P' --to-mesh 4 --to-ranks 4,5,6,7 --to 'S(1)' \
    --shape 1024x1000 --staging-cap 64K --verify --iters 1
check "cross: the cap's staging" 8 0 '"nrounds":16,"staging_bytes_per_rank_max":64000,' "" \
    run --mesh 2x2 --ranks 0,1,2,3 --from 'S(0),P' --to-mesh 4 --to-ranks 4,5,6,7 --to 'S(1)' \
    --shape 1024x1000 --staging-cap 64K --verify --json --iters 1
xbatch=$(mktemp)
cat >"$xbatch" <<'EOF2'
[{"shape": "64x48", "from": "S(0),P", "to": "S(1)"},
 {"shape": "48", "dtype": "bf16", "from": "R,R", "to": "R"},
 {"shape": "30x7", "dtype": "f64", "from": "S(1),S(0)", "to": "S(0)"},
 {"shape": "5x0", "dtype": "c64", "from": "S(0),S(1)", "to": "S(1)"}]
EOF2
check "cross: a batch, --nonblocking, under a staging cap" 4 0 '"verified":true' "" \
    run --mesh 2x2 --batch "$xbatch" --to-mesh 4 --to-ranks 3,2,1,0 --nonblocking \
    --staging-cap 1K --verify --json --iters 1
check "cross: a batch, random values, verified" 6 0 \
    "verified: all 3474 elements on every destination rank match; every source rank's input intact" "" \
    run --mesh 2x2 --batch "$xbatch" --to-mesh 4 --to-ranks 2,3,4,5 --verify --iters 1 --fill random --seed 5
check "cross: a batch timed beside one tensor at a time" 6 0 '"ntensors":4,"one_by_one_median_us":' "" \
    run --mesh 2x2 --batch "$xbatch" --to-mesh 4 --to-ranks 2,3,4,5 --verify --iters 2 --json
check "cross: a batch relabeled under a cap" 6 0 '"verified":true' "" \
    run --mesh 2x2 --batch "$xbatch" --to-mesh 4 --to-ranks 3,2,1,0 --verify --iters 1 --json \
    --relabel --staging-cap 100
check "cross: a batch's destination mesh larger than the job" 4 2 "" \
    "dtr run: --to-mesh: the mesh uses ranks up to 5 and the job has 4: run under 'mpirun -n 6'" \
    run --mesh 2x2 --batch "$xbatch" --to-mesh 4 --to-ranks 2,3,4,5
# a batch whose entries cast ("to_dtype"): between meshes during the move, verified in the
# destination dtype; within one mesh refused by the library; a bad name named with its entry
cbatch=$(mktemp)
cat >"$cbatch" <<'EOF2'
[{"shape": "64x48", "from": "S(0),P", "to": "S(1)", "to_dtype": "bf16"},
 {"shape": "30x7", "dtype": "f64", "from": "S(1),S(0)", "to": "S(0)", "to_dtype": "f32"},
 {"shape": "48", "dtype": "bf16", "from": "R,R", "to": "R"}]
EOF2
check "cross: a batch casting two of its tensors, random values, verified" 6 0 \
    "verified: all 3474 elements on every destination rank match; every source rank's input intact" "" \
    run --mesh 2x2 --batch "$cbatch" --to-mesh 4 --to-ranks 2,3,4,5 --verify --iters 1 --fill random --seed 5
check "cross: a casting batch, --nonblocking under a staging cap, digests" 6 0 '"verified":true' "" \
    run --mesh 2x2 --batch "$cbatch" --to-mesh 4 --to-ranks 5,4,3,2 --nonblocking --staging-cap 1K \
    --digest --verify --iters 1 --json
echo '[{"shape": "8x8", "from": "S(0)", "to": "R", "to_dtype": "bf16"}]' >"$cbatch"
check "a batch within one mesh does not cast: refused" 2 3 "" \
    "dtr run: --batch $cbatch: dtr_change_create: tensor 0 (src[0] -> dst[0]): dtr_plan_create: dst: dtype bf16 from src's f32: a batch does not cast yet (plan the tensor alone)" \
    run --mesh 2 --batch "$cbatch"
echo '[{"shape": "8x8", "from": "S(0)", "to": "R", "to_dtype": "f33"}]' >"$cbatch"
check "a batch entry's bad to_dtype: named" 2 2 "" \
    "dtr run: --batch $cbatch: line 1, entry 0: to_dtype: dtr_dtype_parse: text \"f33\": not a dtype" \
    run --mesh 2 --batch "$cbatch" --to-mesh 2 --to-ranks 1,0
rm -f "$cbatch"
# --block-scale: block-scaled fp8 between meshes, every byte and scale checked against the
# reference quantizer (blocks crossing the source's shard boundaries: 300 rows over 2 ranks)
check "block-scaled fp8: bf16 S(0) -> f8e4m3 S(1), 128 x 128 blocks, verified" 4 0 \
    "verified: all 38706 fp8 elements and scales of the destination ranks' blocks equal the reference quantizer's; every source rank's input intact" "" \
    run --mesh 2 --shape 300x129 --from 'S(0)' --dtype bf16 --to-mesh 2 --to-ranks 2,3 --to 'S(1)' \
    --to-dtype f8e4m3 --block-scale 128 --verify --iters 1
check "block-scaled fp8: random values, f8e5m2, non-blocking, JSON" 4 0 '"block_scale":64,' "" \
    run --mesh 2 --shape 300x129 --from 'S(0)' --dtype f32 --to-mesh 2x2 --to 'S(1),R' \
    --to-dtype f8e5m2 --block-scale 64 --fill random --seed 9 --nonblocking --verify --iters 1 --json
check "block-scaled fp8: a changed byte found" 4 1 "" \
    "dtr run: verification failed: 1 of 38715 elements wrong; first on rank 3 at local index 19199" \
    run --mesh 2 --shape 300x129 --from 'S(0)' --dtype bf16 --to-mesh 2 --to-ranks 2,3 --to 'S(1)' \
    --to-dtype f8e5m2 --block-scale 64 --fill random --seed 3 --verify --iters 1 --inject-mismatch 3
fbatch=$(mktemp)
cat >"$fbatch" <<'EOF2'
[{"shape": "300x129", "dtype": "bf16", "from": "S(0)", "to": "S(1)", "to_dtype": "f8e4m3"},
 {"shape": "1000", "dtype": "f32", "from": "R", "to": "S(0)", "to_dtype": "f8e5m2"}]
EOF2
check "block-scaled fp8: a batch between overlapping meshes" 3 0 \
    '"block_scale":128,"batch":"'"$fbatch"'","ntensors":2,"one_by_one_median_us":null,"one_by_one_over_batched":null,"verified":true,"mismatches":0,"checked":39714,' "" \
    run --mesh 2 --batch "$fbatch" --to-mesh 3 --to-ranks 2,0,1 --block-scale 128 --verify --iters 1 --json
check "block-scaled fp8: a batch's digests, its tensors and their scales" 3 0 \
    "  digests: 4 of 4 tensors compared, every result's == its source's: delivered" "" \
    run --mesh 2 --batch "$fbatch" --to-mesh 3 --to-ranks 2,0,1 --block-scale 128 --digest --iters 1
rm -f "$fbatch"
check "block-scaled fp8: within one mesh needs --to-mesh" 2 2 "" \
    "dtr run: --block-scale: with --to-mesh (a change between meshes; give the same mesh and ranks to quantize within one)" \
    run --mesh 2 --shape 8x8 --from 'S(0)' --to R --to-dtype f8e4m3 --block-scale 4
check "block-scaled fp8: not into bf16" 4 2 "" \
    "dtr run: --to-mesh: dtr_change_create: dst[0]: dtype bf16: opts->block_scale scales into f8e4m3 or f8e5m2" \
    run --mesh 2 --shape 8x8 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to R --to-dtype bf16 --block-scale 4
check "block-scaled fp8: not from a Partial source" 4 3 "" \
    "dtr run: --to-mesh: dtr_change_create: src[0]: Partial on mesh dim 0: block-scaled fp8 quantizes values" \
    run --mesh 2 --shape 8x8 --from 'P' --to-mesh 2 --to-ranks 2,3 --to R --to-dtype f8e4m3 --block-scale 4
check "block-scaled fp8: a 1-D tensor's blocks of B elements" 4 0 \
    "  block-scaled: one f32 scale per block of 4 elements, laid out by the destination's placements; only fp8 bytes and scales moved" "" \
    run --mesh 2 --shape 1000 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to R --to-dtype f8e5m2 --block-scale 4 --verify --iters 1
fdump=$(mktemp -d)
check "block-scaled fp8: --dump writes the fp8 blocks and the scales" 4 0 "verified: all" "" \
    run --mesh 2 --shape 300x129 --from 'S(0)' --dtype bf16 --to-mesh 2 --to-ranks 2,3 --to 'S(1)' \
    --to-dtype f8e4m3 --block-scale 128 --verify --iters 1 --dump "$fdump"
# sources 150x129 bf16 on ranks 0, 1; fp8 300x65 and 300x64 on ranks 2, 3; the scales (3x2,
# S(1)) a 3x1 column each
fdump_ok=1
for f in rank0.in:38700 rank1.in:38700 rank2.out:19500 rank3.out:19200 rank2.scales:12 rank3.scales:12; do
    [ "$(stat -c %s "$fdump/${f%%:*}" 2>/dev/null)" = "${f#*:}" ] || fdump_ok=0
done
[ ! -e "$fdump/rank0.scales" ] || fdump_ok=0
if [ $fdump_ok -eq 1 ]; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL: block-scaled --dump files (sizes)"
    ls -l "$fdump"
fi
rm -rf "$fdump"
check "block-scaled fp8: a block edge of 0" 2 2 "" \
    "dtr run: --block-scale: '0' is not a block edge 1..1073741824" \
    run --mesh 2 --shape 8x8 --from 'S(0)' --to-mesh 2 --to-ranks 1,0 --to R --to-dtype f8e4m3 --block-scale 0
# --digest --block-scale: what the source ranks quantized (dtr_change_sent) against what
# arrived, the fp8 tensors and then their scales
check "block-scaled fp8: digests of what was sent and what arrived" 4 0 \
    "  digests: 2 of 2 tensors compared, every result's == its source's: delivered" "" \
    run --mesh 2 --shape 300x129 --from 'S(0)' --dtype bf16 --to-mesh 2 --to-ranks 2,3 --to 'S(1)' \
    --to-dtype f8e4m3 --block-scale 128 --digest --iters 1
check "block-scaled fp8: digests in JSON, one object a tensor and one its scales" 4 0 \
    '"digests":[{"digest_src":"0x' "" \
    run --mesh 2 --shape 300x129 --from 'S(0)' --dtype bf16 --to-mesh 2 --to-ranks 2,3 --to 'S(1)' \
    --to-dtype f8e4m3 --block-scale 128 --digest --iters 1 --json
check "block-scaled fp8: a changed byte fails the digest" 4 1 "" \
    "is not the source's" \
    run --mesh 2 --shape 300x129 --from 'S(0)' --dtype bf16 --to-mesh 2 --to-ranks 2,3 --to 'S(1)' \
    --to-dtype f8e5m2 --block-scale 64 --digest --iters 1 --inject-mismatch 3
# dtr plan's cost flags: with no latency the balanced reduction wins (as dtr plan --alpha-us 0
# plans it), by default the gather and reduce-scatter; bad values named, exit 2
check "cost flags: --alpha-us 0 plans the balanced reduction" 4 0 '"reduce_exchange":1},"nsteps":1,' "" \
    run --mesh 2x2 --shape 64x64 --from 'P,S(0)' --to 'S(0),S(0)' --alpha-us 0 --verify --iters 1 --json
check "cost flags: the default plans a gather and a reduce-scatter" 4 0 '"collectives":{"all_gather":1,"reduce_scatter":1,' "" \
    run --mesh 2x2 --shape 64x64 --from 'P,S(0)' --to 'S(0),S(0)' --verify --iters 1 --json
check "cost flags: --alpha-us -1 is refused by name" 4 2 "" "dtr run: --alpha-us: " \
    run --mesh 2x2 --shape 64x64 --from 'P,S(0)' --to 'S(0),S(0)' --alpha-us -1
check "cost flags: --inter-bandwidth-gbps 0 is refused by name" 4 2 "" "dtr run: --inter-bandwidth-gbps: " \
    run --mesh 2x2 --shape 64x64 --from 'P,S(0)' --to 'S(0),S(0)' --inter-bandwidth-gbps 0
printf '[{"shape": "8x6", "from": "S(0),R", "to": "R,R"}]' >"$xbatch"
check "cost flags: --bandwidth-gbps with --batch, refused by name" 4 2 "" "dtr run: --bandwidth-gbps: " \
    run --mesh 2x2 --batch "$xbatch" --bandwidth-gbps x
check "cost flags: --local-gbps between meshes, refused by name" 4 2 "" "dtr run: --local-gbps: " \
    run --mesh 2 --shape 8 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to R --local-gbps -5
rm -f "$xbatch"
# --digest: the pattern fill of 9x7 f32 digests to 0x3cf361c393e23ae2 (computed apart from dtr,
# in Python, from the dumped tensor), whatever the layout; a result one byte off does not
for move in "S(0),R R,S(1) 4" "R S(1) 2" "S(1),S(0) R,R 4" "P S(0) 2"; do
    read -r from to n <<<"$move"
    check "--digest: $from -> $to" "$n" 0 "digest: result 0x3cf361c393e23ae2" "" \
        run --mesh "$([ "$n" = 4 ] && echo 2x2 || echo 2)" --shape 9x7 --from "$from" --to "$to" --digest --iters 1
done
check "--digest: JSON" 4 0 '"digest_src":"0x3cf361c393e23ae2","digest_dst":"0x3cf361c393e23ae2"' "" \
    run --mesh 2x2 --shape 9x7 --from 'S(0),R' --to 'R,S(1)' --digest --iters 1 --json
check "--digest: a Partial source has none" 2 0 '"digest_src":null,"digest_dst":"0x3cf361c393e23ae2"' "" \
    run --mesh 2 --shape 9x7 --from P --to 'S(1)' --digest --iters 1 --json
check "--digest: a result one byte off is not delivered (exit 1)" 4 1 "!= the source's: NOT delivered" \
    "dtr run: --digest: the result's digest 0x" \
    run --mesh 2x2 --shape 9x7 --from 'S(0),R' --to 'R,S(1)' --digest --iters 1 --inject-mismatch 0
# (rank 3 holds the second copy of its block on mesh dim 0's R: the digest counts the first)
check "--digest: a replica past the first is not covered (--verify is)" 4 0 "== the source's: delivered" "" \
    run --mesh 2x2 --shape 9x7 --from 'S(0),R' --to 'R,S(1)' --digest --iters 1 --inject-mismatch 3
check "--digest: a Partial destination is refused" 2 2 "" \
    "dtr run: --digest: the destination 'P(sum)' is Partial: it holds no values to digest until reduced" \
    run --mesh 2 --shape 9x7 --from 'S(0)' --to P --digest
check "--digest: between meshes" 4 0 "digest: result 0x3cf361c393e23ae2 == the source's: delivered" "" \
    run --mesh 2 --shape 9x7 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to 'S(1)' --digest --iters 1
check "--digest: between meshes, one byte off on the destination's first rank (exit 1)" 4 1 \
    "!= the source's: NOT delivered" "dtr run: --digest: the result's digest 0x" \
    run --mesh 2 --shape 9x7 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to 'S(1)' --digest --iters 1 --inject-mismatch 2
# a batch: tensor 0 the 9x7 above, tensor 1 a Partial source (no source digest), tensor 2 f64
dbatch=$(mktemp)
printf '[{"shape": "9x7", "from": "S(0),R", "to": "R,R"}, {"shape": "5", "from": "P,R", "to": "R,S(0)"}, {"shape": "3x3", "dtype": "f64", "from": "R,R", "to": "S(1),S(0)"}]' >"$dbatch"
check "--digest: a batch" 4 0 "digests: 2 of 3 tensors compared, every result's == its source's: delivered (the others: a Partial source or a cast)" "" \
    run --mesh 2x2 --batch "$dbatch" --digest --iters 1
check "--digest: a batch, JSON" 4 0 '"digests":[{"digest_src":"0x3cf361c393e23ae2","digest_dst":"0x3cf361c393e23ae2"},{"digest_src":null,' "" \
    run --mesh 2x2 --batch "$dbatch" --digest --iters 1 --json
printf '[{"shape": "9x7", "from": "S(0)", "to": "R"}, {"shape": "4", "from": "S(0)", "to": "P"}]' >"$dbatch"
check "--digest: a batch's Partial destination is refused" 4 2 "" \
    "dtr run: --digest: the destination of tensor 1 'P(sum)' is Partial" \
    run --mesh 2 --batch "$dbatch" --to-mesh 2 --to-ranks 2,3 --digest
rm -f "$dbatch"
check "--help" 1 0 "usage: mpirun -n N dtr run" "" run --help
# one rank's arguments refused, the others' fine: every rank exits at once (exit 2), rank 0
# printing the bad rank's message (before, the others waited in their first collective)
with_bad_rank 1 "a bad argument on rank 1 alone" 2 2 "" \
    'dtr run: rank 1: --shape: dtr_shape_parse: text "9xq": at offset 2' \
    run --mesh 2 --from 'S(0)' --to R --iters 1
with_bad_rank 0 "a bad argument on rank 0 alone" 2 2 "" \
    'dtr run: --shape: dtr_shape_parse: text "9xq": at offset 2' \
    run --mesh 2 --from 'S(0)' --to R --iters 1
# different engines on the ranks (--device cuda on one): refused on every rank at once
# (the message names --device: a build without CUDA refuses --device cuda by name instead)
with_rank_args 1 "--device cuda" "--device cpu" "--device cuda on one rank alone" 2 2 "" \
    "--device" \
    run --mesh 2 --shape 13x7 --from 'S(0)' --to 'S(1)' --iters 0
with_bad_rank 2 "a bad argument on one rank, between meshes" 4 2 "" \
    'dtr run: rank 2: --shape: dtr_shape_parse: text "9xq"' \
    run --mesh 2 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to R --iters 1
# the MPI backend's switches differ on one rank: every rank fails its first group naming the
# variable (before, the ranks took different paths: a hang, or rings read with another size)
with_rank_env 1 DTR_MPI_SHM_CHUNK=64 "DTR_MPI_SHM_CHUNK on rank 1 alone" 3 1 "" \
    "DTR_MPI_SHM_CHUNK differs between the group's members: 32768 on member 0, 64 on member 1" \
    run --mesh 3 --shape 8x8 --from 'S(0)' --to 'S(1)' --iters 1
with_rank_env 0 DTR_MPI_SHM_GATHER=0 "DTR_MPI_SHM_GATHER=0 on rank 0 alone" 2 1 "" \
    "DTR_MPI_SHM_GATHER differs between the group's members: 0 on member 0, 1 on member 1" \
    run --mesh 2 --shape 8x8 --from 'S(1)' --to R --iters 1
finish "dtr run CLI"
