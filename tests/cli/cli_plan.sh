#!/usr/bin/env bash
# `dtr plan`: exact JSON for the issue's example, the shape of --compare, the table, and the
# errors (one line on stderr; exit 2 for bad arguments, 3 for a change dtr refuses).
# Usage: cli_plan.sh DTR
set -u
dtr=$1
source "$(dirname "$0")/check_lib.sh"

check "issue example, exact JSON" 0 0 \
    '"strategy":"optimal","chosen_by":"greedy","steps":[{"mesh_dim":0,"kind":"all_to_all","from":"S(0)","to":"S(1)","tensor_dim":0,"tensor_dim2":1,"recv_bytes_per_rank_max":48,"send_bytes_per_rank_max":48,"extra_bytes_per_rank_max":112,"modeled_time_us":15.0048}],"collectives":{"all_gather":0,"reduce_scatter":0,"all_reduce":0,"all_to_all":1,"exchange":0,"reduce_exchange":0},"recv_bytes_per_rank_max":48,"lower_bound_recv_bytes_per_rank":48,"peak_extra_bytes_per_rank":112,"modeled_time_us":15.0048}' "" \
    plan --mesh 4 --shape 8x8 --from 'S(0)' --to 'S(1)' --json
check "compare JSON has both" 0 0 '"compat":{"strategy":"compat"' "" \
    plan --mesh 2x2 --shape 8x8 --from 'S(0),S(0)' --to 'R,S(0)' --compare --json
check "compare JSON optimal at the bound" 0 0 '"optimal":{"strategy":"optimal","chosen_by":"exchange","steps":[{"mesh_dim":-1,"kind":"exchange","from":"S(0),S(0)","to":"R,S(0)","recv_bytes_per_rank_max":128' "" \
    plan --mesh 2x2 --shape 8x8 --from 'S(0),S(0)' --to 'R,S(0)' --compare --json
check "compare JSON with compat refused" 0 0 '"compat":{"error":"dtr_plan_create: compat: the seed algorithm' "" \
    plan --mesh 2x3x2 --shape 12x4 --from 'S(0),R,S(0)' --to 'R,S(0),S(0)' --compare --json
check "compare table" 0 0 'lower bound on the most bytes one rank receives: 64' "" \
    plan --mesh 2x2 --shape 8x8 --from 'S(0),S(1)' --to 'S(1),S(0)' --compare
check "compat table, DESIGN order" 0 0 '  3   0     R -> S(1)                    local_chunk' "" \
    plan --mesh 2x2 --shape 8x8 --from 'S(0),S(1)' --to 'S(1),S(0)' --strategy compat
check "no steps" 0 0 'no steps: the placements are equal' "" \
    plan --mesh 4 --shape 8x8 --from 'S(0)' --to 'S(0)'
check "cost flags change the model" 0 0 '"modeled_time_us":3.0048}' "" \
    plan --mesh 4 --shape 8x8 --from 'S(0)' --to 'S(1)' --json --alpha-us 1
DTR_ALPHA_US=1 check "environment sets the model" 0 0 '"modeled_time_us":3.0048}' "" \
    plan --mesh 4 --shape 8x8 --from 'S(0)' --to 'S(1)' --json
check "help" 0 0 'usage: dtr plan --mesh MESH' "" plan --help
# Shard orders (docs/semantics.md): FSDP2's unshard of a tp-first dim is one all-gather on dp;
# compat refuses by name (exit 3).
check "shard order: one all-gather, exact JSON" 0 0 \
    '"strategy":"optimal","chosen_by":"greedy","steps":[{"mesh_dim":0,"kind":"all_gather","from":"S(0)[1]","to":"R","tensor_dim":0,"recv_bytes_per_rank_max":64,"send_bytes_per_rank_max":64,"extra_bytes_per_rank_max":192,"modeled_time_us":5.0064}],"collectives":{"all_gather":1,"reduce_scatter":0,"all_reduce":0,"all_to_all":0,"exchange":0,"reduce_exchange":0},"recv_bytes_per_rank_max":64,"lower_bound_recv_bytes_per_rank":64,"peak_extra_bytes_per_rank":192,"modeled_time_us":5.0064}' "" \
    plan --mesh 2x4 --shape 16x8 --from '_S(0, 4),S(0)' --to 'R,S(0)' --json
check "shard order: compat refuses" 0 3 "" \
    "dtr plan: dtr_plan_create: compat: the seed algorithm knows only mesh-dim order, not the shard order of src; the optimal strategy handles this change" \
    plan --mesh 2x4 --shape 16x8 --from 'S(0)[1],S(0)[0]' --to 'R,S(0)' --strategy compat
check "shard order: a _StridedShard that is strided for the shape" 0 2 "" \
    "dtr plan: --from: dtr_spec_init: placements: on tensor dim 0 of length 7 the _StridedShard layout (strided pieces) is not the shard order S(0)[1],S(0)[0]; dtr holds one block per rank" \
    plan --mesh 3x2 --shape 7 --from '_S(0,2),S(0)' --to 'R,R'
# --backward: the gradient arriving in --to goes back to --from, Partial there becoming R
# (the same plan dtr run --backward runs, tests/cli/cli_run.sh)
check "backward JSON" 0 0 \
    '"strategy":"optimal","backward":true,"chosen_by":"greedy","steps":[{"mesh_dim":1,"kind":"all_to_all","from":"S(1)","to":"S(0)","tensor_dim":1,"tensor_dim2":0,"recv_bytes_per_rank_max":48,"send_bytes_per_rank_max":48,"extra_bytes_per_rank_max":144,"modeled_time_us":5.0048},{"mesh_dim":0,"kind":"all_reduce","from":"P(max)","to":"R","recv_bytes_per_rank_max":96,"send_bytes_per_rank_max":96,"extra_bytes_per_rank_max":192,"modeled_time_us":10.0096}],"collectives":{"all_gather":0,"reduce_scatter":0,"all_reduce":1,"all_to_all":1,"exchange":0,"reduce_exchange":0},"recv_bytes_per_rank_max":144,"lower_bound_recv_bytes_per_rank":96,"peak_extra_bytes_per_rank":192,"modeled_time_us":15.0144}' "" \
    plan --mesh 2x2 --shape 8x6 --from 'R,S(0)' --to 'P(max),S(1)' --backward --json
check "backward text: a P(sum) source gets a Replicate gradient" 0 0 \
    'plan (backward) optimal (best candidate: greedy): mesh 2x2, shape 8x6 f32, R,S(1) -> R,S(0)' "" \
    plan --mesh 2x2 --shape 8x6 --from 'P,S(0)' --to 'R,S(1)' --backward
# --backward-dtype: PyTorch's backward_dtype (the gradient's steps in it, cast back last)
check "backward_dtype: the steps in bf16, cast back to f32" 0 0 \
    '"strategy":"optimal","backward":true,"chosen_by":"greedy","cast":{"from":"f32","to":"bf16"},"cast_out":{"from":"bf16","to":"f32"},"steps":[{"mesh_dim":0,"kind":"reduce_scatter","from":"P(sum)","to":"S(0)","tensor_dim":0,"recv_bytes_per_rank_max":48,' "" \
    plan --mesh 4 --shape 8x4 --from 'S(0)' --to 'P(sum)' --backward --backward-dtype bf16 --json
check "backward_dtype in the text" 0 0 \
    'plan (backward) optimal (best candidate: greedy): mesh 4, shape 8x4 f32, P(sum) -> S(0), cast to bf16 first, to f32 last' "" \
    plan --mesh 4 --shape 8x4 --from 'S(0)' --to 'P(sum)' --backward --backward-dtype bf16
check "backward_dtype: only with --backward" 0 2 "" \
    "dtr plan: --backward-dtype: only with --backward (it is the dtype of the gradient's steps)" \
    plan --mesh 4 --shape 8 --from R --to R --backward-dtype bf16
check "backward_dtype: an integer dtype is refused by name" 0 3 "" \
    "dtr plan: dtr_plan_backward_in: backward_dtype: i32 between the gradient's f32 and the input's f32" \
    plan --mesh 4 --shape 8 --from R --to R --backward --backward-dtype i32
check "backward_dtype: not a dtype" 0 2 "" "dtr plan: --backward-dtype: dtr_dtype_parse:" \
    plan --mesh 4 --shape 8 --from R --to R --backward --backward-dtype f33
check "backward compat" 0 0 '  2   1     R -> S(0)                    local_chunk' "" \
    plan --mesh 2x2 --shape 8x6 --from 'P,S(0)' --to 'R,S(1)' --backward --strategy compat
check "backward of R -> P(sum) on i32: the forward is refused" 0 3 "" \
    "dtr plan: --backward: the forward change is refused: dtr_plan_create: mesh dim 0: R -> P(sum) divides by 2, which i32 cannot do exactly" \
    plan --mesh 2 --shape 8 --from R --to P --dtype i32 --backward
check "backward of S -> P(max): the forward is refused" 0 3 "" "a Shard becomes Partial only as P(sum)" \
    plan --mesh 4 --shape 8 --from 'S(0)' --to 'P(max)' --backward

check "compat refuses the unsafe seed plan" 0 3 "" \
    "dtr plan: dtr_plan_create: compat: the seed algorithm's plan would corrupt data: step 1 (mesh dim 0: S(0) -> R)" \
    plan --mesh 2x3x2 --shape 12x4 --from 'S(0),R,S(0)' --to 'R,S(0),S(0)' --strategy compat
check "compat runs the same seed plan where every element lands right" 0 0 \
    '  1   0     S(0) -> R                    all_gather' "" \
    plan --mesh 2x2x3 --shape 11 --from 'S(0),R,S(0)' --to 'R,S(0),S(0)' --strategy compat
check "compat runs a seed plan that lands right through blocks of other lengths" 0 0 \
    "  blocks: the seed's own, of other lengths than the canonical layout on the way (docs/planner.md)" "" \
    plan --mesh 3x3x2 --shape 9x4 --from 'S(0),R,S(0)' --to 'R,S(0),S(0)' --strategy compat
# (the gather pads to the members' largest block, 2 rows of 4 f32, from 2 members: 64 bytes;
# its output holds 6 rows where the layout of R,R,S(0) has 5: 96 bytes, plus the 64 staged)
check "those blocks in the JSON figures" 0 0 \
    '"strategy":"compat","seed_blocks":true,"chosen_by":"compat","steps":[{"mesh_dim":0,"kind":"all_gather","from":"S(0)","to":"R","tensor_dim":0,"recv_bytes_per_rank_max":64,"send_bytes_per_rank_max":64,"extra_bytes_per_rank_max":160,' "" \
    plan --mesh 3x3x2 --shape 9x4 --from 'S(0),R,S(0)' --to 'R,S(0),S(0)' --strategy compat --json
# Mixed Partial ops are reduced innermost mesh dim first (docs/semantics.md)
check "mixed Partial ops: the max of mesh dim 1 before the sum of mesh dim 0" 0 0 \
    '"steps":[{"mesh_dim":1,"kind":"all_reduce","from":"P(max)","to":"R",' "" \
    plan --mesh 2x2 --shape 8x8 --from 'P(sum),P(max)' --to 'S(0),R' --json
check "mixed Partial ops: compat refuses the seed's order" 0 3 "" \
    "dtr plan: dtr_plan_create: compat: the seed algorithm's plan would give another value: it reduces mesh dim 0's P(sum) before mesh dim 1's P(max), but mixed Partial ops are reduced innermost mesh dim first; the optimal strategy handles this change" \
    plan --mesh 2x2 --shape 8x8 --from 'P(sum),P(max)' --to 'S(0),R' --strategy compat
check "mixed Partial ops: a kept inner P(sum) is reduced too and made Partial again" 0 0 \
    '  3   1     R -> P(sum)                  local_scale' "" \
    plan --mesh 2x2 --shape 8x8 --from 'P(max),P(sum)' --to 'R,P(sum)'
check "mixed Partial ops: a kept inner P(product) cannot be made Partial again" 0 3 "" \
    "dtr plan: dtr_plan_create: mesh dim 1: P(product) stays, but mesh dim 0's P(max) is reduced, and mixed Partial ops are reduced innermost mesh dim first: keeping the value means reducing mesh dim 1 too and making it P(product) again, which no partition of a value into a product allows; make it R in the target" \
    plan --mesh 2x2 --shape 8x8 --from 'P(max),P(product)' --to 'R,P(product)'
check "mixed Partial ops: a new P(sum) outside a P(product)" 0 3 "" \
    "dtr plan: dtr_plan_create: mesh dim 0: R -> P(sum) divides by 2, but mesh dim 1's P(product), reduced first (mixed Partial ops are reduced innermost mesh dim first), would multiply the divided values" \
    plan --mesh 2x2 --shape 8x8 --from 'R,P(product)' --to 'P(sum),P(product)'
check "P(a) -> P(b)" 0 3 "" "dtr plan: dtr_plan_create: mesh dim 0: P(sum) -> P(avg): a Partial cannot change its reduce op" \
    plan --mesh 2x2 --shape 8x8 --from 'P,R' --to 'P(avg),R'
check "S -> P(avg)" 0 3 "" "mesh dim 1: S(0) -> P(avg): a Shard becomes Partial only as P(sum) (its chunk in zeros, as in PyTorch); zeros are no partition for avg" \
    plan --mesh 2x2 --shape 8x8 --from 'R,S(0)' --to 'R,P(avg)'
check "a cast plan says so" 0 0 "S(0),R -> R,S(1), cast to bf16 first" "" \
    plan --mesh 2x2 --shape 8x4 --from 'S(0),R' --to 'R,S(1)' --to-dtype bf16
check "between meshes a cast alone runs as the boxes are packed" 0 0 "  cast from f32 to bf16 as each box is packed" "" \
    plan --mesh 2 --ranks 0,1 --shape 8x4 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to 'S(1)' --to-dtype bf16
check "between meshes a cast alone has no plan on the source mesh" 0 0 '"pre":null' "" \
    plan --mesh 2 --ranks 0,1 --shape 8x4 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to 'S(1)' --to-dtype bf16 --json
check "between meshes a Partial source that casts reduces first" 0 0 "first, on the source mesh (to S(1) bf16): reduce_scatter" "" \
    plan --mesh 2 --ranks 0,1 --shape 8x4 --from P --to-mesh 2 --to-ranks 2,3 --to 'S(1)' --to-dtype bf16
check "--to-dtype: a bad dtype names the flag" 0 2 "" "dtr plan: --to-dtype:" \
    plan --mesh 2x2 --shape 8x4 --from 'S(0),R' --to 'R,S(1)' --to-dtype f33
check "--to-dtype: not with --batch" 0 2 "" "--to-dtype: not with --batch" \
    plan --mesh 2 --batch /dev/null --to-dtype bf16
check "R -> P(product)" 0 3 "" "mesh dim 0: R -> P(product): no partition of a value into a product is defined" \
    plan --mesh 2 --shape 8 --from R --to 'P(product)'
check "fp8 reduction" 0 3 "" "P(sum) -> R reduces, and f8e5m2 is storage only" \
    plan --mesh 2 --shape 8 --from P --to R --dtype f8e5m2
check "complex max" 0 3 "" "dtr plan: dtr_plan_create: mesh dim 0: P(max) -> R on c64: complex values reduce by sum and avg only" \
    plan --mesh 2 --shape 8 --from 'P(max)' --to R --dtype complex64
check "--to placements" 0 2 "" "dtr plan: --to: dtr_spec_init: placements[0]: S(3): shard dim out of range for a 2-d tensor" \
    plan --mesh 2x2 --shape 8x8 --from 'S(0),R' --to 'S(3),R'
check "--from count" 0 2 "" "dtr plan: --from: dtr_spec_init: nplacements: 1 placements for a 2-d mesh" \
    plan --mesh 2x2 --shape 8x8 --from 'S(0)' --to 'R,R'
check "--to missing" 0 2 "" "dtr plan: --to is required" plan --mesh 2x2 --shape 8x8 --from 'S(0),R'
check "--from missing" 0 2 "" "dtr plan: --from is required" plan --mesh 2x2 --shape 8x8 --to 'S(0),R'
# node-aware cost: with mesh dim 0 across nodes, P,R -> S(0),S(0) keeps its quarter first
# and all-reduces only that over the nodes; the exchange after it reads its node's replica
check "--nodes-of: the nodes line" 0 0 \
    "  nodes: mesh dim 0 crosses nodes (20 us, 1.5 GB/s), the others stay inside one" "" \
    plan --mesh 2x4 --shape 1024x1024 --from 'P,R' --to 'S(0),S(0)' --nodes-of 0
check "--nodes-of: less over the nodes" 0 0 \
    '"mesh_dims_across_nodes":[0],"steps":[{"mesh_dim":1,"kind":"local_chunk","from":"R","to":"S(0)","tensor_dim":0,"across_nodes":false,"node_recv_bytes_max":0,"recv_bytes_per_rank_max":0,"send_bytes_per_rank_max":0,"extra_bytes_per_rank_max":1048576,"modeled_time_us":20.9715},{"mesh_dim":0,"kind":"all_reduce","from":"P(sum)","to":"R","across_nodes":true,"node_recv_bytes_max":4194304,' "" \
    plan --mesh 2x4 --shape 1024x1024 --from 'P,R' --to 'S(0),S(0)' --nodes-of 0 --json
check "--nodes-of: an exchange served inside the node" 0 0 \
    '"mesh_dims_across_nodes":[0],"steps":[{"mesh_dim":-1,"kind":"exchange","from":"R,S(0)","to":"S(0),S(0)","across_nodes":false,' "" \
    plan --mesh 2x4 --shape 1024x1024 --from 'R,S(0)' --to 'S(0),S(0)' --nodes-of 0 --json
# a rank receives 512 KiB, a node 1 MiB in all: half its ranks find their rows on it
check "--nodes-of: an exchange over mesh dim 0 marked" 0 0 "exchange                524288        1048576     272.43  across nodes, 1048576 B into a node" "" \
    plan --mesh 2x4 --shape 1024x1024 --from 'S(0),S(1)' --to 'S(1),S(0)' --nodes-of 0
check "--nodes-of with its own figures" 0 0 "  nodes: mesh dims 0,1 cross nodes (7 us, 3 GB/s)" "" \
    plan --mesh 2x2x2 --shape 64x64 --from 'S(0),R,R' --to 'R,R,R' --nodes-of 0,1 \
    --inter-alpha-us 7 --inter-bandwidth-gbps 3
check "--nodes-of: not a mesh dim" 0 2 "" \
    'dtr plan: --nodes-of: dtr_mesh_dims_parse: "2": item 0 is not a mesh dim of a 2-d mesh (0..1)' \
    plan --mesh 2x4 --shape 8 --from R --to R --nodes-of 2
check "--inter-alpha-us without --nodes-of" 0 2 "" \
    "dtr plan: --inter-alpha-us: goes with --nodes-of (the mesh dims that cross nodes)" \
    plan --mesh 2x4 --shape 8 --from R --to R --inter-alpha-us 3
check "--inter-bandwidth-gbps 0" 0 2 "" \
    'dtr plan: --inter-bandwidth-gbps: dtr_cost_model_nodes: inter_bandwidth_gbps "0": must be one finite number > 0' \
    plan --mesh 2x4 --shape 8 --from R --to R --nodes-of 0 --inter-bandwidth-gbps 0
check "--alpha-us" 0 2 "" 'dtr plan: --alpha-us: dtr_cost_model_set: alpha_us "x": item 0 must be a finite number >= 0' \
    plan --mesh 2 --shape 8 --from R --to R --alpha-us x
check "--bandwidth-gbps" 0 2 "" 'dtr plan: --bandwidth-gbps: dtr_cost_model_set: bandwidth_gbps "0": item 0 must be a finite number > 0' \
    plan --mesh 2 --shape 8 --from R --to R --bandwidth-gbps 0
check "--local-gbps" 0 2 "" 'dtr plan: --local-gbps: dtr_cost_model_set: local_gbps "-3"' \
    plan --mesh 2 --shape 8 --from R --to R --local-gbps -3
check "--strategy" 0 2 "" 'dtr plan: --strategy: dtr_strategy_parse: text "fast": not a strategy (optimal, compat)' \
    plan --mesh 2 --shape 8 --from R --to R --strategy fast
check "--compare with --strategy" 0 2 "" 'dtr plan: --compare shows both strategies; drop --strategy' \
    plan --mesh 2 --shape 8 --from R --to R --strategy compat --compare
DTR_BANDWIDTH_GBPS=fast check "bad environment" 0 2 "" 'dtr plan: dtr_cost_model_from_env: DTR_BANDWIDTH_GBPS: bandwidth_gbps "fast": item 0 must be a finite number > 0' \
    plan --mesh 2 --shape 8 --from R --to R
check "unknown option" 0 2 "" "dtr plan: unknown option '--form'" plan --mesh 2 --shape 8 --form R --to R
check "--backward with --batch" 0 2 "" "dtr plan: --backward: not with --batch" \
    plan --mesh 2 --batch /dev/null --backward

# Between meshes (docs/cross-mesh.md): the issue's refit, exact JSON; the boxes in the table;
# the refusals by name
check "cross: refit on 8 ranks, exact JSON" 0 0 \
    '"shape":[8,8],"src":{"mesh":[2,2],"ranks":[0,1,2,3],"dtype":"f32","placements":["S(0)","P(sum)"]},"dst":{"mesh":[4],"ranks":[4,5,6,7],"dtype":"f32","placements":["S(1)"]},"pre":{"strategy":"optimal","chosen_by":"greedy","steps":[{"mesh_dim":1,"kind":"reduce_scatter","from":"P(sum)","to":"S(1)","tensor_dim":1,"recv_bytes_per_rank_max":64,"send_bytes_per_rank_max":64,"extra_bytes_per_rank_max":128,"modeled_time_us":5.0064}],"collectives":{"all_gather":0,"reduce_scatter":1,"all_reduce":0,"all_to_all":0,"exchange":0,"reduce_exchange":0},"recv_bytes_per_rank_max":64,"lower_bound_recv_bytes_per_rank":64,"peak_extra_bytes_per_rank":128,"modeled_time_us":5.0064},"messages":8,"local_copies":0,"moved_bytes":256,"send_bytes_per_rank_max":64,"recv_bytes_per_rank_max":64,"lower_bound_send_bytes_per_rank":64,"lower_bound_recv_bytes_per_rank":64,"peak_extra_bytes_per_rank":192,"modeled_time_us":15.0141,"nrounds":1,"staging_bytes_per_rank_max":64}' "" \
    plan --mesh 2x2 --ranks 0,1,2,3 --from 'S(0),P' --to-mesh 4 --to-ranks 4,5,6,7 --to 'S(1)' --shape 8x8 --json
check "cross: a box of the table" 0 0 '       3      7  4..7,6..7                                            32' "" \
    plan --mesh 2x2 --ranks 0,1,2,3 --from 'S(0),P' --to-mesh 4 --to-ranks 4,5,6,7 --to 'S(1)' --shape 8x8
check "cross: overlapping ranks keep their boxes, cast first" 0 0 \
    '       1      1  2..3,0..3                                            16  (kept)' "" \
    plan --mesh 4 --from 'S(0)' --to-mesh 2 --to-ranks 1,2 --to 'S(1)' --shape 8x8 --to-dtype bf16
check "cross: the figures of that plan" 0 0 \
    '  most bytes one rank sends: 32 (lower bound 32); receives: 48 (lower bound 48)' "" \
    plan --mesh 4 --from 'S(0)' --to-mesh 2 --to-ranks 1,2 --to 'S(1)' --shape 8x8 --to-dtype bf16
check "cross: a Partial destination" 0 3 "" \
    "dtr plan: --to-mesh: dtr_change_create: dst: placements[0] is P(sum): a change between meshes ends in Shard or Replicate (make it Partial on the destination mesh afterwards)" \
    plan --mesh 4 --from 'S(0)' --to-mesh 2 --to-ranks 1,2 --to P --shape 8x8
check "cross: a dtype that does not cast" 0 3 "" \
    "dtr plan: --to-mesh: dtr_change_create: dst: dtype i32 from src's f32: a redistribution casts between float dtypes" \
    plan --mesh 4 --from 'S(0)' --to-mesh 2 --to-ranks 1,2 --to R --shape 8x8 --to-dtype i32
check "cross: --to-ranks of another length" 0 2 "" \
    "dtr plan: --to-mesh/--to-ranks: dtr_mesh_parse: nranks: 3 ranks given for a mesh of 2" \
    plan --mesh 4 --from 'S(0)' --to-mesh 2 --to-ranks 1,2,3 --to R --shape 8x8
check "cross: a rank twice" 0 2 "" \
    "dtr plan: --to-mesh/--to-ranks: dtr_mesh_parse: ranks: rank 1 appears twice (positions 0 and 1)" \
    plan --mesh 4 --from 'S(0)' --to-mesh 2 --to-ranks 1,1 --to R --shape 8x8
check "cross: a negative rank" 0 2 "" "dtr plan: --to-mesh/--to-ranks: dtr_mesh_parse: ranks[1]: -2, must be >= 0" \
    plan --mesh 4 --from 'S(0)' --to-mesh 2 --to-ranks 1,-2 --to R --shape 8x8
check "cross: --to-ranks alone" 0 2 "" "dtr plan: --to-ranks: goes with --to-mesh (the destination mesh's ranks)" \
    plan --mesh 4 --from 'S(0)' --to-ranks 1,2 --to R --shape 8x8
check "cross: --to out of range for the shape" 0 2 "" \
    "dtr plan: --to: dtr_spec_init: placements[0]: S(2): shard dim out of range for a 2-d tensor" \
    plan --mesh 4 --from 'S(0)' --to-mesh 2 --to-ranks 1,2 --to 'S(2)' --shape 8x8
check "cross: not with --compare yet" 0 2 "" \
    "dtr plan: --compare: not with --to-mesh yet (docs/cross-mesh.md" \
    plan --mesh 4 --from 'S(0)' --to-mesh 2 --to-ranks 1,2 --to R --shape 8x8 --compare

# relabeling: 2x3 S(1),S(0) and 3x2 S(0),S(1) over the ranks reversed hold the same blocks
check "cross: relabeling finds the permutation, exact JSON tail" 0 0 \
    '"nrounds":1,"staging_bytes_per_rank_max":0,"relabel":[0,3,1,4,2,5],"relabel_saved_bytes":2244,"permutation":true}' "" \
    plan --mesh 2x3 --from 'S(1),S(0)' --to-mesh 3x2 --to-ranks 5,4,3,2,1,0 --to 'S(0),S(1)' \
    --shape 33x17 --relabel --json
check "cross: relabeling in the text" 0 0 \
    "  relabeled: ranks by coordinate of the destination mesh 0,3,1,4,2,5; 2244 bytes kept from moving; a pure permutation: nothing moves" "" \
    plan --mesh 2x3 --from 'S(1),S(0)' --to-mesh 3x2 --to-ranks 5,4,3,2,1,0 --to 'S(0),S(1)' \
    --shape 33x17 --relabel
# a cap of one f64 element: each chunk one element, each rank one a round
check "cross: a staging cap, in rounds" 0 0 \
    '"messages":16,"local_copies":0,"moved_bytes":128,"send_bytes_per_rank_max":64,"recv_bytes_per_rank_max":64,"lower_bound_send_bytes_per_rank":64,"lower_bound_recv_bytes_per_rank":64,' "" \
    plan --mesh 2 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to R --shape 8 --dtype f64 --staging-cap 8 --json
check "cross: the cap's rounds" 0 0 '"nrounds":8,"staging_bytes_per_rank_max":8,"staging_cap_bytes":8}' "" \
    plan --mesh 2 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to R --shape 8 --dtype f64 --staging-cap 8 --json
check "cross: a cap below one element" 0 3 "" \
    "dtr plan: --to-mesh: dtr_change_create: opts->staging_cap_bytes: 4, less than one element: nothing could move" \
    plan --mesh 2 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to R --shape 8 --dtype f64 --staging-cap 4
check "cross: --staging-cap not a count" 0 2 "" \
    "dtr plan: --staging-cap: '1x' is not a byte count 1..8589934591 (like 65536, 64K, 16M or 1G)" \
    plan --mesh 2 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to R --shape 8 --staging-cap 1x
check "cross: --relabel alone" 0 2 "" \
    "dtr plan: --relabel: goes with --to-mesh (it orders the destination mesh's ranks)" \
    plan --mesh 2 --from 'S(0)' --to R --shape 8 --relabel
check "cross: --staging-cap alone" 0 2 "" \
    "dtr plan: --staging-cap: goes with --to-mesh (it caps the moves between meshes)" \
    plan --mesh 2 --from 'S(0)' --to R --shape 8 --staging-cap 64K
batch=$(mktemp)
cat >"$batch" <<'EOF2'
[{"shape": "64x48", "from": "S(0),P", "to": "S(1)"},
 {"shape": "48", "dtype": "bf16", "from": "R,R", "to": "R"},
 {"shape": "30x7", "dtype": "f64", "from": "S(1),S(0)", "to": "S(0)"}]
EOF2
check "cross: a batch, its tensors" 0 0 "  tensor 2: shape 30x7 f64 S(1),S(0) -> f64 S(0)" "" \
    plan --mesh 2x2 --batch "$batch" --to-mesh 4 --to-ranks 2,3,4,5
check "cross: a batch's figures" 0 0 \
    "  24 messages between ranks (23160 bytes) in 1 round, 6 boxes kept where they are" "" \
    plan --mesh 2x2 --batch "$batch" --to-mesh 4 --to-ranks 2,3,4,5
check "cross: a Partial summed at the receivers" 0 0 \
    "  tensor 0: shape 64x48 f32 S(0),P(sum) -> f32 S(1); the 2 addends summed at the receivers, in addend order" "" \
    plan --mesh 2x2 --batch "$batch" --to-mesh 4 --to-ranks 2,3,4,5
DTR_CROSS_REDUCE=source check "cross: DTR_CROSS_REDUCE=source reduces on the source mesh" 0 0 \
    "  16 messages between ranks (10872 bytes) in 1 round, 6 boxes kept where they are" "" \
    plan --mesh 2x2 --batch "$batch" --to-mesh 4 --to-ranks 2,3,4,5
check "cross: under a cap, reduced on the source mesh" 0 0 \
    "  tensor 0: shape 64x48 f32 S(0),P(sum) -> f32 S(1); first, on the source mesh (to S(0),R f32): all_reduce" "" \
    plan --mesh 2x2 --batch "$batch" --to-mesh 4 --to-ranks 2,3,4,5 --staging-cap 64K
check "cross: the addends in JSON" 0 0 '"summed_at_receiver":2,"pre":null' "" \
    plan --mesh 2x2 --batch "$batch" --to-mesh 4 --to-ranks 2,3,4,5 --json
DTR_CROSS_REDUCE=1 check "cross: DTR_CROSS_REDUCE checked without a Partial too" 0 2 "" \
    "dtr plan: --to-mesh: dtr_change_create: DTR_CROSS_REDUCE: '1', must be auto, source or receiver" \
    plan --mesh 2 --from 'S(0)' --to-mesh 2 --to-ranks 2,3 --to R --shape 8
DTR_CROSS_REDUCE=sender check "cross: DTR_CROSS_REDUCE not a choice" 0 2 "" \
    "dtr plan: --to-mesh: dtr_change_create: DTR_CROSS_REDUCE: 'sender', must be auto, source or receiver" \
    plan --mesh 2x2 --shape 8x8 --from 'S(0),P' --to-mesh 4 --to-ranks 2,3,4,5 --to 'S(1)'
check "cross: a batch in JSON" 0 0 '"src":{"mesh":[2,2],"ranks":[0,1,2,3]},"dst":{"mesh":[4],"ranks":[2,3,4,5]},"tensors":[{"shape":[64,48],' "" \
    plan --mesh 2x2 --batch "$batch" --to-mesh 4 --to-ranks 2,3,4,5 --json
check "cross: a batch takes no --shape" 0 2 "" \
    "dtr plan: --shape: not with --batch (the file gives each tensor's shape, dtype, change and to_dtype)" \
    plan --mesh 2x2 --batch "$batch" --to-mesh 4 --to-ranks 2,3,4,5 --shape 4
cat >"$batch" <<'EOF2'
[{"shape": "64x48", "from": "S(0),P", "to": "S(1)", "to_dtype": "bf16"},
 {"shape": "30x7", "dtype": "f64", "from": "S(1),S(0)", "to": "S(0)", "to_dtype": "f32"}]
EOF2
check "cross: a batch's casts: the reduction in the target dtype" 0 0 \
    "  tensor 0: shape 64x48 f32 S(0),P(sum) -> bf16 S(1); first, on the source mesh (to S(0),R bf16): all_reduce" "" \
    plan --mesh 2x2 --batch "$batch" --to-mesh 4 --to-ranks 2,3,4,5
check "cross: a batch's casts: a cast alone as the boxes are packed" 0 0 \
    "  tensor 1: shape 30x7 f64 S(1),S(0) -> f32 S(0); cast from f64 to f32 as each box is packed" "" \
    plan --mesh 2x2 --batch "$batch" --to-mesh 4 --to-ranks 2,3,4,5
check "cross: a batch's casts in JSON" 0 0 '"dst":{"mesh":[4],"ranks":[2,3,4,5],"dtype":"f32","placements":["S(0)"]},"pre":null}' "" \
    plan --mesh 2x2 --batch "$batch" --to-mesh 4 --to-ranks 2,3,4,5 --json
rm -f "$batch"

# --block-scale: the move of the fp8 tensor and its scales (3 x 2 blocks of 128), said first
check "block-scaled fp8 between meshes: the tensor and its scales" 0 0 \
    "  tensor 1: shape 3x2 f32 R -> f32 S(1)" "" \
    plan --mesh 2 --shape 300x129 --from 'S(0)' --dtype bf16 --to-mesh 4 --to-ranks 2,3,4,5 --to 'S(1)' --to-dtype f8e4m3 --block-scale 128
check "block-scaled fp8 within one mesh: a batch of two" 0 0 \
    "block-scaled fp8: one f32 scale per 128 x 128 block (the blocks' amax all-reduced on the source mesh first); tensor 0 below is the fp8 tensor, tensor 1 its scales" "" \
    plan --mesh 2 --shape 300x129 --from 'S(0)' --dtype bf16 --to 'S(1)' --to-dtype f8e4m3 --block-scale 128
check "block-scaled fp8 in JSON" 0 0 '"block_scale":128,"strategy":"optimal","ntensors":2,' "" \
    plan --mesh 2 --shape 300x129 --from 'S(0)' --dtype bf16 --to 'S(1)' --to-dtype f8e4m3 --block-scale 128 --json
check "block-scaled fp8: an integer source refused" 0 2 "" \
    "dtr plan: --to: dtr_change_create: src[0]: dtype i32: block-scaled fp8 quantizes f32, f64, f16 or bf16 values" \
    plan --mesh 2 --shape 300x129 --from 'S(0)' --dtype i32 --to 'S(1)' --to-dtype f8e4m3 --block-scale 128
check "block-scaled fp8: not with --backward" 0 2 "" \
    "dtr plan: --backward: not with --block-scale" \
    plan --mesh 2 --shape 8x8 --from 'S(0)' --to 'S(1)' --to-dtype f8e4m3 --block-scale 4 --backward
check "block-scaled fp8: not with --compare" 0 2 "" \
    "dtr plan: --compare: not with --block-scale (a block-scaled change plans with the optimal strategy alone)" \
    plan --mesh 2 --shape 8x8 --from 'S(0)' --to 'S(1)' --to-dtype f8e4m3 --block-scale 4 --compare
check "a cast into fp8 without --block-scale points at it" 0 3 "" \
    "to fp8 with one scale per block, block-scaled (dtr_change_options_t.block_scale, dtr --block-scale, Python block_scale=)" \
    plan --mesh 2 --shape 8x8 --from 'S(0)' --to 'S(1)' --to-dtype f8e4m3

finish "cli plan"
