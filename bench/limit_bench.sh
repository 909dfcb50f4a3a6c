#!/usr/bin/env bash
# The distance to the memory: for each transition, the least bytes each rank must read and
# write (below), the machine's copy bandwidth with as many processes as ranks at the same
# size (bench/copy_bw.c, measured in the same run), and time / (those bytes / bandwidth)
# for dtr (its default: the shared-memory reductions) and for Open MPI's own collectives of
# the same plan (dtr run's baseline with DTR_MPI_SHM=0: MPI_Reduce_scatter_block,
# MPI_Allreduce, MPI_Allgather, MPI_Alltoallw).
#
# Least bytes per rank, T the tensor's bytes and n the ranks: S(0)->R reads the n pieces
# and writes T: 2T. P->S(0) reads its whole contribution and writes its piece: T + T/n
# (every contribution byte must be read by someone; the n outputs written). P->R: 2T.
# S(0)->S(1): reads and writes its piece, 2T/n.
#
# Usage: bash bench/limit_bench.sh [OUT.md]   (default: the table on stdout only)
# Env: SIZES_MIB="1 16 64"  RANKS="2 4"  DTYPES="f32 bf16 f16"  ITERS=10
set -eu
cd "$(dirname "$0")/.."
sizes=${SIZES_MIB:-1 16 64}
ranks=${RANKS:-2 4}
dtypes=${DTYPES:-f32 bf16 f16}
iters=${ITERS:-10}
bazel build -c opt //tools:dtr //bench:copy_bw >/dev/null 2>&1
bazel shutdown >/dev/null 2>&1 || true # its server's idle work would share the 2 cores
source bench/common.sh
copy_bw=$(pwd)/bazel-bin/bench/copy_bw

table=$(mktemp)
trap 'rm -f "$table"' EXIT
{
    echo "| ranks | dtype | transition | MiB | least MB/rank | copy GB/s/rank | limit us | dtr us | dtr / limit | Open MPI us | Open MPI / limit | dtr / its S(0)->R |"
    echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$table"
cat "$table"
for n in $ranks; do
    for mib in $sizes; do
        bytes=$((mib << 20))
        bw=$(field rank_gbps "$(mpirun --oversubscribe -n "$n" "$copy_bw" "$bytes" 10)")
        for dtype in $dtypes; do
            es=4
            [ "$dtype" != f32 ] && es=2
            rows=$((bytes / 1024 / es))
            gather_us=
            for spec in "S(0)|R" "P|S(0)" "P|R" "S(0)|S(1)"; do
                from=${spec%%|*}
                to=${spec##*|}
                case $spec in
                "S(0)|R" | "P|R") least=$((2 * bytes)) ;;
                "P|S(0)") least=$((bytes + bytes / n)) ;;
                *) least=$((2 * bytes / n)) ;;
                esac
                args=(run --mesh "$n" --shape "${rows}x1024" --dtype "$dtype" --from "$from"
                    --to "$to" --iters "$iters" --warmup 2 --json)
                ours=$(mpirun --oversubscribe -n "$n" "$dtr" "${args[@]}")
                ompi=$(DTR_MPI_SHM=0 mpirun --oversubscribe -n "$n" "$dtr" "${args[@]}")
                us=$(field median_us "$ours")
                ompi_us=$(field baseline_median_us "$ompi")
                [ "$spec" = "S(0)|R" ] && gather_us=$us
                awk -v n="$n" -v d="$dtype" -v f="$from" -v t="$to" -v mib="$mib" \
                    -v least="$least" -v bw="$bw" -v us="$us" -v o="$ompi_us" -v g="$gather_us" \
                    'BEGIN { limit = least / (bw * 1e3);
                             printf "| %s | %s | %s -> %s | %s | %.1f | %.2f | %.0f | %.0f | %.2f | %.0f | %.2f | %.2f |\n",
                                    n, d, f, t, mib, least / 1e6, bw, limit, us, us / limit, o, o / limit, us / g }' \
                    | tee -a "$table"
            done
        done
    done
done
if [ $# -ge 1 ]; then
    {
        echo
        echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores with \`bash bench/limit_bench.sh\` (SIZES_MIB=\"$sizes\" RANKS=\"$ranks\" DTYPES=\"$dtypes\" ITERS=$iters):"
        echo
        cat "$table"
    } >>"$1"
fi
