#!/usr/bin/env bash
# Changes between meshes (docs/cross-mesh.md), side by side in one run per row
# (bench/cross_mesh_bench.c): dtr's batch; the same tensors one plan at a time; what people
# do without dtr (gather the whole tensor on the source ranks with Open MPI's
# MPI_Allreduce / MPI_Allgatherv, send it whole to each destination rank, slice); and the
# limit (the busiest destination rank's output written once at the copy bandwidth of as many
# processes, measured in the same run: every byte a destination rank must write, received or
# kept; a Partial source's reduction needs more). dtr's results are checked byte for byte against
# gather-then-slice's in every row.
#
# Rows: the issue's refit on 8 ranks (4 training ranks as 2x2, every tensor S(0),P, to 4
# inference ranks with tensor parallelism: GPT-2 medium's 292 tensors, and uniform lists),
# one of them under a 64 MiB staging cap; 8 -> 8 reorders and a 2x4 -> 4x2 reshape, with
# and without --relabel; and the same kinds on 2 ranks, a core each, where the ratios mean
# something on this 2-core machine (8 ranks share 2 cores: they measure the scheduler).
# Then the RL refit as trainers hold it (FSDP: bf16, every tensor S(0) on the trainer mesh)
# for GPT-2 medium and a mixture of experts (the MoE list: 64 experts a layer, stacked, so
# S(0) shards them by expert; by column and row on the inference mesh), each moved as bf16
# and as block-scaled f8e4m3 ("quantized": --block-scale 128, the amax all-reduced and the
# tensors quantized on the trainer ranks, fp8 and scales moved), on 2 and 8 ranks. Every
# row also times the digests (proof of delivery: every source and result digested where it
# lies, one all-reduce; quantized, what the trainer ranks sent and what arrived, scales too)
# and says whether they agree ("n/a" where the source is Partial). "same values": dtr's
# result against gather-then-slice's, byte for byte (quantized: each element within half an
# fp8 step of it, bench/cross_mesh_bench.c).
#
# Usage: bash bench/cross_mesh_bench.sh [OUT.md]   (the table on stdout; with OUT.md, e.g.
#        docs/cross-mesh.md, also as its section "## Benchmark", replacing an earlier one)
# Env: ITERS=5 (timed rounds per row; each form in each position in turn), ROWS=all|quick
set -eu
cd "$(dirname "$0")/.."
iters=${ITERS:-5}
rows=${ROWS:-all}
out_md=${1:-}
bazel build -c opt //bench:cross_mesh_bench >/dev/null 2>&1
bazel shutdown >/dev/null 2>&1 || true # its server's idle work would share the 2 cores
source bench/common.sh
bin=$(pwd)/bazel-bin/bench/cross_mesh_bench
table=$(mktemp)
trap 'rm -f "$table"' EXIT

refit8="--mesh 2x2 --ranks 0,1,2,3 --from S(0),P --to-mesh 4 --to-ranks 4,5,6,7"
refit2="--mesh 1x2 --ranks 0,1 --from S(0),P --to-mesh 2 --to-ranks 1,0"
rev8="--mesh 8 --from S(0) --to-mesh 8 --to-ranks 7,6,5,4,3,2,1,0 --to S(0)"
reshape8="--mesh 2x4 --from S(0),S(1) --to-mesh 4x2 --to S(1),S(0)"
rev2="--mesh 2 --from S(0) --to-mesh 2 --to-ranks 1,0 --to S(0)"
fsdp2="--mesh 2 --ranks 0,1 --from S(0) --to-mesh 2 --to-ranks 1,0 --dtype bf16"
fsdp8="--mesh 4 --ranks 0,1,2,3 --from S(0) --to-mesh 4 --to-ranks 4,5,6,7 --dtype bf16"
fp8="--block-scale 128"

# row RANKS LABEL LIST ARGS...: one run, one table line
row() {
    local n=$1 label=$2 list=$3
    shift 3
    local j
    j=$(mpirun --oversubscribe -n "$n" "$bin" --list "$list" --iters "$iters" "$@")
    local mib=$(( $(field bytes "$j") / 1048576 ))
    local ok="yes"
    [ "$(field mismatched_bytes "$j")" = 0 ] || ok="NO ($(field mismatched_bytes "$j") differ)"
    local cap=$(field cap "$j") stage=$(( $(field staging_bytes_max "$j") / 1048576 ))
    local dt=$(field dtype "$j") bs=$(field block_scale "$j")
    [ "$bs" = 0 ] || dt="$dt -> f8e4m3 / $bs"
    local capcol="$stage"
    [ "$cap" = 0 ] || capcol="$stage / $(( cap / 1048576 ))"
    printf '| %s | %s | %s | %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %s | %s | %s | %s | %s | %.1f | %s | %s |\n' \
        "$n" "$label" "$list" "$dt" "$(field tensors "$j")" "$mib" \
        "$(awk "BEGIN{print $(field batch_us "$j")/1000}")" \
        "$(awk "BEGIN{print $(field one_by_one_us "$j")/1000}")" \
        "$(awk "BEGIN{print $(field gather_us "$j")/1000}")" \
        "$(awk "BEGIN{print $(field limit_us "$j")/1000}")" \
        "$(field gather_over_batch "$j")" "$(field one_by_one_over_batch "$j")" \
        "$(field batch_over_limit "$j")" "$capcol" \
        "$(( $(field scratch_bytes_max "$j") / 1048576 ))" \
        "$(awk "BEGIN{print $(field digest_us "$j")/1000}")" "$(field digests "$j")" "$ok" >>"$table"
}

{
    echo "| ranks | change | list | dtype | tensors | MiB | dtr batch ms | one at a time ms | gather-then-slice ms | limit ms | gather / batch | one at a time / batch | batch / limit | staging MiB (/ cap) | scratch MiB | digests ms | digests | same values |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$table"
row 2 "refit 1x2 S(0),P -> 2 (TP)" uniform:16M:4 $refit2 --to 'S(1)'
row 2 "refit 1x2 S(0),P -> 2 (TP)" uniform:64M:2 $refit2 --to 'S(1)'
row 2 "refit 1x2 S(0),P -> 2 (TP)" uniform:16K:256 $refit2 --to 'S(1)'
row 2 "reorder 2 -> 2" uniform:16M:4 $rev2
row 2 "reorder 2 -> 2, --relabel" uniform:16M:4 $rev2 --relabel
row 2 "refit 2 S(0) -> 2 (TP), quantized" uniform:16M:4 $fsdp2 $fp8
if [ "$rows" = all ]; then
    for list in gpt2-medium moe; do
        row 2 "refit 2 S(0) -> 2 (TP)" $list $fsdp2
        row 2 "refit 2 S(0) -> 2 (TP), quantized" $list $fsdp2 $fp8
        row 8 "refit 4 S(0) -> 4 (TP)" $list $fsdp8
        row 8 "refit 4 S(0) -> 4 (TP), quantized" $list $fsdp8 $fp8
    done
    row 2 "refit 1x2 S(0),P -> 2 (TP)" gpt2-medium $refit2
    row 8 "refit 2x2 S(0),P -> 4 (TP)" gpt2-medium $refit8
    row 8 "refit, --staging-cap 64 MiB" gpt2-medium $refit8 --staging-cap 67108864
fi
row 8 "refit 2x2 S(0),P -> 4 (TP)" uniform:16M:4 $refit8 --to 'S(1)'
row 8 "refit 2x2 S(0),P -> 4 (TP)" uniform:64M:2 $refit8 --to 'S(1)'
row 8 "refit 2x2 S(0),P -> 4 (TP)" uniform:16K:256 $refit8 --to 'S(1)'
row 8 "reorder 8 -> 8 (reversed)" uniform:16M:4 $rev8
row 8 "reorder 8 -> 8, --relabel" uniform:16M:4 $rev8 --relabel
row 8 "reshape 2x4 -> 4x2" uniform:16M:4 $reshape8
row 8 "reshape 2x4 -> 4x2, --relabel" uniform:16M:4 $reshape8 --relabel

cat "$table"
if [ -n "$out_md" ]; then
    section=$(mktemp)
    {
        echo "## Benchmark"
        echo
        echo "\`bash bench/cross_mesh_bench.sh docs/cross-mesh.md\` ($(date -u +%Y-%m-%d), $(nproc) cores:"
        echo "$(lscpu | sed -n 's/^Model name: *//p'), Open MPI $(mpirun --version | head -1 | grep -oE '[0-9.]+$'),"
        echo "ITERS=$iters; medians of the slowest rank). 8 ranks share the 2 cores: their ratios"
        echo "measure the scheduler as much as dtr; the 2-rank rows have a core each."
        echo
        cat "$table"
        echo
    } >"$section"
    python3 - "$out_md" "$section" <<'EOF'
import re, sys
path, section = sys.argv[1], open(sys.argv[2]).read()
text = open(path).read()
pat = re.compile(r"^## Benchmark\n.*?(?=^## |\Z)", re.S | re.M)
text = pat.sub(section, text) if pat.search(text) else text.rstrip("\n") + "\n\n" + section
open(path, "w").write(text)
EOF
    rm -f "$section"
fi
