#!/usr/bin/env bash
# The distance to the memory: for each transition, the least bytes each rank must read and
# write (below), the machine's copy bandwidth with as many processes as ranks at the same
# size (bench/copy_bw.c, measured in the same run), and time / (those bytes / bandwidth)
# for dtr (its default: the shared-memory reductions; and with `--buffers shared`, its
# blocks in a dtr_context_alloc allocation, which reductions read in place), for Open MPI's own collectives of
# the same plan (dtr run's baseline with DTR_MPI_SHM=0: MPI_Reduce_scatter_block,
# MPI_Allreduce, MPI_Allgather, MPI_Alltoallw) and, for f32, for Intel MPI's
# (bench/coll_bench.c built with its mpigcc, run with its mpiexec) where one is installed.
#
# Least bytes per rank, T the tensor's bytes and n the ranks: S(0)->R reads the n pieces
# and writes T: 2T. P->S(0) reads its whole contribution and writes its piece: T + T/n
# (every contribution byte must be read by someone; the n outputs written). P->R: 2T.
# S(0)->S(1): reads and writes its piece, 2T/n.
#
# Each cell is the best of ROUNDS rounds (each round: every transition of a size, one
# process per measurement, medians of ITERS calls): the machine is shared, and a slow phase
# of seconds would otherwise land on whichever rows ran then. The best copy bandwidth is
# taken too, so the limit stays the lowest.
#
# Usage: bash bench/limit_bench.sh [OUT.md]   (the table on stdout; with OUT.md, e.g.
#        docs/executor-bench.md, also as its section "## Distance to the memory", replacing
#        an earlier one)
# Env: SIZES_MIB="1 16 64"  RANKS="2 4"  DTYPES="f32 bf16 f16"  ITERS=10  ROUNDS=2
#      IMPI_ROOT=/opt/impi (Intel MPI, e.g. `python3 -m venv /opt/impi &&
#      /opt/impi/bin/pip install impi-rt impi-devel`; its columns read "-" without it)
set -eu
cd "$(dirname "$0")/.."
sizes=${SIZES_MIB:-1 16 64}
ranks=${RANKS:-2 4}
dtypes=${DTYPES:-f32 bf16 f16}
iters=${ITERS:-10}
rounds=${ROUNDS:-2}
impi=${IMPI_ROOT:-/opt/impi}
bazel build -c opt //cli:dtr //bench:copy_bw //bench:coll_bench >/dev/null 2>&1
bazel shutdown >/dev/null 2>&1 || true # its server's idle work would share the 2 cores
source bench/common.sh
copy_bw=$(pwd)/bazel-bin/bench/copy_bw
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
impi_version=
if [ -x "$impi/bin/mpigcc" ] && [ -x "$impi/bin/mpiexec" ] &&
    I_MPI_ROOT=$impi "$impi/bin/mpigcc" -O2 -o "$work/coll_bench_impi" bench/coll_bench.c 2>/dev/null; then
    impi_version=$(I_MPI_ROOT=$impi LD_LIBRARY_PATH=$impi/lib "$impi/bin/mpiexec" -n 1 \
        "$work/coll_bench_impi" 4096 1 | grep -oE 'Intel[^"]*Library [0-9.]+')
fi
# Intel MPI's collectives of f32 on n ranks, BYTES: its one-line JSON, or nothing
impi_run() {
    [ -n "$impi_version" ] || return 0
    I_MPI_ROOT=$impi LD_LIBRARY_PATH=$impi/lib "$impi/bin/mpiexec" -n "$1" \
        "$work/coll_bench_impi" "$2" "$iters"
}
best() { sort -g | head -1; } # the least of the numbers on stdin
most() { sort -g | tail -1; }

table=$work/table
{
    echo "| ranks | dtype | transition | MiB | least MB/rank | copy GB/s/rank | copy spread % | limit us | dtr us | dtr / limit | dtr shared us | shared / limit | Open MPI us | Open MPI / limit | Intel MPI us | Intel MPI / limit | dtr / its S(0)->R | shared / its S(0)->R |"
    echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$table"
cat "$table"
specs=("S(0)|R" "P|S(0)" "P|R" "S(0)|S(1)")
for n in $ranks; do
    for mib in $sizes; do
        bytes=$((mib << 20))
        : >"$work/m" # lines "KEY VALUE", KEY = bw | impi.KIND | DTYPE.SPEC.(dtr|shared|ompi)
        for round in $(seq "$rounds"); do
            probe=$(mpirun --oversubscribe -n "$n" "$copy_bw" "$bytes" 10 5)
            echo "bw $(field rank_gbps "$probe")" >>"$work/m"
            echo "bwworst $(field rank_gbps_worst "$probe")" >>"$work/m"
            j=$(impi_run "$n" "$bytes")
            for kind in all_gather reduce_scatter all_reduce; do
                [ -n "$j" ] && echo "impi.$kind $(grep -oE "\"${kind}_us\": [0-9.]+" <<<"$j" | cut -d' ' -f2)" >>"$work/m"
            done
            for dtype in $dtypes; do
                es=4
                [ "$dtype" != f32 ] && es=2
                rows=$((bytes / 1024 / es))
                for i in "${!specs[@]}"; do
                    spec=${specs[$i]}
                    args=(run --mesh "$n" --shape "${rows}x1024" --dtype "$dtype" --from "${spec%%|*}"
                        --to "${spec##*|}" --iters "$iters" --warmup 2 --json)
                    echo "$dtype.$i.dtr $(field median_us "$(mpirun --oversubscribe -n "$n" "$dtr" "${args[@]}")")" >>"$work/m"
                    echo "$dtype.$i.shared $(field median_us "$(mpirun --oversubscribe -n "$n" "$dtr" "${args[@]}" --buffers shared)")" >>"$work/m"
                    echo "$dtype.$i.ompi $(field baseline_median_us "$(DTR_MPI_SHM=0 mpirun --oversubscribe -n "$n" "$dtr" "${args[@]}")")" >>"$work/m"
                done
            done
        done
        val() { awk -v k="$1" '$1 == k { print $2 }' "$work/m"; }
        bw=$(val bw | most)
        spread=$(awk -v b="$bw" -v w="$(val bwworst | best)" 'BEGIN { printf "%.0f", 100 * (1 - w / b) }')
        for dtype in $dtypes; do
            gather_us=$(val "$dtype.0.dtr" | best)
            gather_shared=$(val "$dtype.0.shared" | best)
            for i in "${!specs[@]}"; do
                spec=${specs[$i]}
                case $spec in
                "S(0)|R" | "P|R") least=$((2 * bytes)) ;;
                "P|S(0)") least=$((bytes + bytes / n)) ;;
                *) least=$((2 * bytes / n)) ;;
                esac
                kinds=(all_gather reduce_scatter all_reduce -)
                intel=-
                [ "$dtype" = f32 ] && [ "${kinds[$i]}" != - ] && [ -n "$impi_version" ] &&
                    intel=$(val "impi.${kinds[$i]}" | best)
                awk -v n="$n" -v d="$dtype" -v f="${spec%%|*}" -v t="${spec##*|}" -v mib="$mib" \
                    -v least="$least" -v bw="$bw" -v sp="$spread" -v us="$(val "$dtype.$i.dtr" | best)" \
                    -v o="$(val "$dtype.$i.ompi" | best)" -v im="$intel" -v g="$gather_us" \
                    -v sh="$(val "$dtype.$i.shared" | best)" -v gs="$gather_shared" \
                    'BEGIN { limit = least / (bw * 1e3);
                             ims = im == "-" ? "- | -" : sprintf("%.0f | %.2f", im, im / limit);
                             printf "| %s | %s | %s -> %s | %s | %.1f | %.2f | %s | %.0f | %.0f | %.2f | %.0f | %.2f | %.0f | %.2f | %s | %.2f | %.2f |\n",
                                    n, d, f, t, mib, least / 1e6, bw, sp, limit, us, us / limit, sh, sh / limit, o, o / limit, ims, us / g, sh / gs }' \
                    | tee -a "$table"
            done
        done
    done
done
if [ $# -ge 1 ]; then
    out=$1
    keep=$(mktemp)
    after=$(mktemp)
    # the sections before this one, and those after it (from the next "## " heading on)
    [ -f "$out" ] && sed '/^## Distance to the memory/,$d' "$out" >"$keep"
    [ -f "$out" ] && awk '/^## Distance to the memory/ { inside = 1; next }
                          inside && /^## / { inside = 0; tail = 1 }
                          tail { print }' "$out" >"$after"
    {
        cat "$keep"
        [ -s "$keep" ] && echo
        echo "## Distance to the memory (generated by bench/limit_bench.sh)"
        echo
        echo "Rerun: \`bash bench/limit_bench.sh docs/executor-bench.md\` (SIZES_MIB=\"$sizes\" RANKS=\"$ranks\""
        echo "DTYPES=\"$dtypes\" ITERS=$iters ROUNDS=$rounds). Measured $(date -u +%Y-%m-%d) on $(nproc) cores, Open MPI"
        echo "$(mpirun --version | head -1 | awk '{print $NF}'), ${impi_version:-no Intel MPI}, tensors of rows x 1024 elements. Each"
        echo "cell is the best of the $rounds rounds. limit = least bytes per rank / the copy bandwidth per rank"
        echo "of as many processes as ranks copying the same size at once (bench/copy_bw.c: from the"
        echo "first rank's start to the last rank's end, counting read and written bytes; each copy"
        echo "from and to memory, through an arena of at least 4x the last-level cache; the best of"
        echo "5 medians a round). copy spread: how far the worst of those medians, over every round,"
        echo "fell below the best (so how still the limit held while this row ran). dtr: \`dtr"
        echo "run\`'s median (the shared-memory paths); dtr shared: the same with \`--buffers shared\`"
        echo "(the blocks in a dtr_context_alloc allocation: reductions read them in place); Open"
        echo "MPI: the same plan's collectives alone"
        echo "with DTR_MPI_SHM=0 (MPI_Allgather, MPI_Reduce_scatter_block, MPI_Allreduce,"
        echo "MPI_Alltoallw; user ops for bf16 and f16); Intel MPI: bench/coll_bench.c built with its"
        echo "mpigcc and run with its mpiexec (PyPI's impi-rt and impi-devel), f32 only. The last"
        echo "two columns: this row's dtr time over the S(0) -> R row's of the same tensor, and"
        echo "the same for dtr shared (over the shared S(0) -> R row)."
        echo
        cat "$table"
        if [ -s "$after" ]; then
            echo
            cat "$after"
        fi
    } >"$out.new"
    mv "$out.new" "$out"
    rm -f "$keep" "$after"
    echo "wrote $out"
fi