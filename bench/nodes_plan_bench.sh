#!/usr/bin/env bash
# Node-aware plans against node-unaware ones, on simulated nodes (tools/mpirun_nodes.sh): for
# changes whose plan differs once mesh dim 0 crosses nodes, `dtr run --verify` with the plan
# made knowing it (--nodes-of auto, the default: MPI says where the ranks run) and as if on
# one node (--nodes-of none), alternating ROUNDS times, best median of ITERS each.
# Usage: bench/nodes_plan_bench.sh [OUT.md]   (NODES=2 PER_NODE=4 SHAPE=4096x4096 ROUNDS=2 ITERS=5
#        MESH=NODESxPER_NODE CHANGES='FROM|TO ...': the mesh's dim 0 must be the nodes)
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
unset OMPI_MCA_btl OMPI_MCA_btl_vader_single_copy_mechanism # (nodes_bench.sh says why)
nodes=${NODES:-2} per=${PER_NODE:-4} shape=${SHAPE:-4096x4096} rounds=${ROUNDS:-2} iters=${ITERS:-5}
mesh=${MESH:-${nodes}x${per}}
bazel build -c opt //cli:dtr >/dev/null 2>&1 || { echo "nodes_plan_bench: build failed" >&2; exit 1; }
changes=${CHANGES:-'R,S(0)|S(0),S(0) R,S(0)|S(0),S(1) P,S(0)|S(0),R P,R|S(0),S(0)'}
run() { # NODES_OF FROM TO: "steps|ms", or "-" where it failed or did not verify
    local out
    out=$(tools/mpirun_nodes.sh --nodes "$nodes" --per-node "$per" -n $((nodes * per)) "$dtr" run \
        --mesh "$mesh" --shape "$shape" --from "$2" --to "$3" --iters "$iters" --verify \
        --json --nodes-of "$1" 2>/dev/null | tail -1)
    [ "$(field verified "$out")" = true ] || { echo -; return; }
    echo "$(field steps_across_nodes "$out")|$(awk -v u="$(field median_us "$out")" 'BEGIN {printf "%.1f", u / 1000}')"
}
table=$(mktemp)
trap 'rm -f "$table"' EXIT
{
    echo "$nodes simulated nodes x $per ranks, mesh $mesh (mesh dim 0 crosses nodes), $shape f32; ms, best of $rounds rounds of the median of $iters;"
    echo "run: \`NODES=$nodes PER_NODE=$per MESH=$mesh SHAPE=$shape ROUNDS=$rounds ITERS=$iters CHANGES='$changes' bash bench/nodes_plan_bench.sh\`"
    echo
    echo "| change | node-aware plan (default: --nodes-of auto) | steps across nodes | ms | plan as on one node (--nodes-of none) | steps across nodes | ms | one-node / node-aware |"
    echo "|---|---|---:|---:|---|---:|---:|---:|"
} >"$table"
for c in $changes; do
    from=${c%%|*} to=${c##*|}
    steps() { "$dtr" plan --mesh "$mesh" --shape "$shape" --from "$from" --to "$to" --json "$@" |
        grep -oE '"mesh_dim":-?[0-9]+,"kind":"[a-z_]+"' | sed -E 's/"mesh_dim":(-?[0-9]+),"kind":"([a-z_]+)"/\2@\1/' |
        sed 's/@-1/@all/' | paste -sd' ' -; }
    aware=$(steps --nodes-of 0) plain=$(steps)
    best_a= best_p= xa= xp=
    for ((r = 0; r < rounds; r++)); do
        a=$(run auto "$from" "$to") p=$(run none "$from" "$to")
        if [ "$a" != - ]; then xa=${a%%|*}; t=${a##*|}; [ -z "$best_a" ] || awk -v x="$t" -v y="$best_a" 'BEGIN {exit !(x < y)}' && best_a=$t; fi
        if [ "$p" != - ]; then xp=${p%%|*}; t=${p##*|}; [ -z "$best_p" ] || awk -v x="$t" -v y="$best_p" 'BEGIN {exit !(x < y)}' && best_p=$t; fi
    done
    ratio=$(awk -v a="${best_a:--}" -v p="${best_p:--}" 'BEGIN {if (a == "-" || p == "-") print "-"; else printf "%.2f", p / a}')
    echo "| $from -> $to | $aware | ${xa:--} | ${best_a:--} | $plain | ${xp:--} | ${best_p:--} | $ratio |" >>"$table"
done
cat "$table"
[ $# -gt 0 ] && { echo; cat "$table"; } >>"$1"
exit 0
