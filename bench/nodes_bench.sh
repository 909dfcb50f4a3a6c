#!/usr/bin/env bash
# Reductions over a group that spans nodes: dtr's hierarchical form against Open MPI's flat
# call on the same group, on simulated nodes (tools/mpirun_nodes.sh: ranks of a node share
# memory, nodes talk TCP over loopback). For each size, dtype and reduction (P -> S(0), the
# reduce-scatter; P -> R, the all-reduce) over a 1-d mesh of all ranks, in one run:
#   hier   `dtr run --json` with the defaults (the hierarchical form),
#   flat   the same with DTR_MPI_HIER=0 (MPI_Reduce_scatter_block / MPI_Allreduce on the
#          group: what the user gets from Open MPI),
# both the median over ITERS of dtr run's plan (every rank's verified data; 0xa5-filled
# scratch, random values), alternating hier and flat ROUNDS times and keeping each cell's
# best. Then Open MPI's own flat call and its hierarchical component (coll/han, off by
# default, turned on with --mca coll_han_priority 100) from bench/coll_bench (f32 only: it
# has no half types), for comparison.
#
# Usage: bench/nodes_bench.sh [OUT.md]   (NODES=2 PER_NODE=4 SIZES="16 64" ROUNDS=2 ITERS=5;
#        HAN=0 leaves out Open MPI's own calls: coll/han's take minutes here)
# Prints a Markdown table (and appends it to OUT.md if given). Needs root (simulated nodes).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
# Open MPI as a user runs it: common.sh's single-copy setting (for the one-node benchmarks)
# made its collectives over these nodes 10-30x slower (16 MiB all-reduce: 3.0 s against 0.12)
unset OMPI_MCA_btl OMPI_MCA_btl_vader_single_copy_mechanism
nodes=${NODES:-2}
per=${PER_NODE:-4}
sizes=${SIZES:-16 64}
rounds=${ROUNDS:-2}
iters=${ITERS:-5}
ranks=$((nodes * per))
bazel build -c opt //cli:dtr //bench:coll_bench >/dev/null 2>&1 || {
    echo "nodes_bench: build failed" >&2
    exit 1
}
launch=(tools/mpirun_nodes.sh --nodes "$nodes" --per-node "$per" -n "$ranks")

# one dtr run: prints its median in ms, or "-" where it failed or did not verify
dtr_ms() {
    local env=$1 mib=$2 dtype=$3 to=$4 es rows out
    [ "$env" = - ] && env=
    case $dtype in f32) es=4 ;; *) es=2 ;; esac
    rows=$((mib * 1048576 / es / 1024))
    out=$(env $env "${launch[@]}" "$dtr" run --mesh "$ranks" --shape "${rows}x1024" --dtype "$dtype" \
        --from P --to "$to" --iters "$iters" --verify --fill random --json 2>/dev/null | tail -1)
    if [ "$(field verified "$out")" != true ]; then echo -; return; fi
    awk -v u="$(field median_us "$out")" 'BEGIN {printf "%.1f", u / 1000}'
}
best() { # best of the numbers given ("-" ignored)
    printf '%s\n' "$@" | grep -v '^-$' | sort -g | head -1 | grep . || echo -
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || a <= 0) print "-"; else printf "%.2f", b / a}'; }

table=$(mktemp)
trap 'rm -f "$table"' EXIT
{
    echo "$nodes simulated nodes x $per ranks, one 1-d mesh of $ranks ranks; ms, best of $rounds rounds of the median of $iters;"
    echo "run: \`NODES=$nodes PER_NODE=$per SIZES=\"$sizes\" ROUNDS=$rounds ITERS=$iters bash bench/nodes_bench.sh\`"
    echo
    echo "| size | dtype | change | dtr hierarchical | Open MPI flat (same group, through dtr) | flat / hierarchical |"
    echo "|---|---|---|---:|---:|---:|"
} >"$table"
for mib in $sizes; do
    for dtype in f32 bf16 f16; do
        for to in 'S(0)' R; do
            h=() f=()
            for ((r = 0; r < rounds; r++)); do
                h+=("$(dtr_ms - "$mib" "$dtype" "$to")")
                f+=("$(dtr_ms DTR_MPI_HIER=0 "$mib" "$dtype" "$to")")
            done
            hb=$(best "${h[@]}") fb=$(best "${f[@]}")
            echo "| $mib MiB | $dtype | P -> $to | $hb | $fb | $(ratio "$hb" "$fb") |" >>"$table"
        done
    done
done
[ "${HAN:-1}" = 0 ] && sizes=
[ -n "$sizes" ] && {
    echo
    echo "Open MPI's own collectives (bench/coll_bench, f32, MPI_COMM_WORLD of the same ranks; ms):"
    echo
    echo "| size | MPI_Reduce_scatter_block flat | with coll/han | MPI_Allreduce flat | with coll/han |"
    echo "|---|---:|---:|---:|---:|"
} >>"$table"
cb() { # ITERS MCA... -- prints reduce_scatter and all_reduce ms
    local out n=$1
    shift
    out=$("${launch[@]}" "$@" bazel-bin/bench/coll_bench "$((mib * 1048576))" "$n" 2>/dev/null | tail -1)
    awk -v a="$(field reduce_scatter_us "$out")" -v b="$(field all_reduce_us "$out")" \
        'BEGIN {if (a == "") print "- -"; else printf "%.1f %.1f", a / 1000, b / 1000}'
}
for mib in $sizes; do
    read -r fr fa <<<"$(cb "$iters")"
    # (one timed call: coll/han's all-reduce takes seconds here)
    read -r hr ha <<<"$(cb 1 --mca coll_han_priority 100)"
    echo "| $mib MiB | $fr | $hr | $fa | $ha |" >>"$table"
done
cat "$table"
if [ $# -gt 0 ]; then
    {
        echo
        cat "$table"
    } >>"$1"
fi
