#!/usr/bin/env bash
# Two dtr builds side by side on exec_bench's rows: is anything slower than before? Every
# row runs `dtr run` with build A, then B, then A, ... (ROUNDS times each, alternating, so a
# slow phase of the shared machine falls on both), and prints each build's best and median
# of the per-run medians and B / A of the bests.
#
# Usage: bash bench/ab_bench.sh DTR_A DTR_B [OUT.md]
#   e.g. git worktree add /tmp/before 85a8d6b && (cd /tmp/before && bazel build -c opt
#        //cli:dtr) && bash bench/ab_bench.sh /tmp/before/bazel-bin/cli/dtr
#        bazel-bin/cli/dtr
# Env: SIZES_MIB="1 4 16 64 256"  RANKS="2 4"  ROUNDS=3
#      SPECS="S(0)|R P|R P|S(0) S(0)|S(1) S(1)|R S(0),S(1)|R,R" (FROM|TO, exec_bench's rows)
set -eu
[ $# -ge 2 ] || { echo "usage: bash bench/ab_bench.sh DTR_A DTR_B [OUT.md]" >&2; exit 2; }
a=$(realpath "$1")
b=$(realpath "$2")
out=${3:-}
cd "$(dirname "$0")/.."
sizes=${SIZES_MIB:-1 4 16 64 256}
ranks=${RANKS:-2 4}
rounds=${ROUNDS:-3}
source bench/common.sh
specs=${SPECS:-$exec_specs}
# the best and the median of the numbers on stdin
stats() { sort -g | awk '{ v[NR] = $1 } END { printf "%.0f %.0f", v[1], (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'; }
table=$(mktemp)
trap 'rm -f "$table"' EXIT
{
    echo "| ranks | transition | mesh | MiB | A best us | A median us | B best us | B median us | B / A (best) |"
    echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
} | tee "$table"
for n in $ranks; do
    for spec in $specs; do
        from=${spec%%|*}
        to=${spec##*|}
        mesh=$(exec_mesh "$n" "$from")
        for mib in $sizes; do
            iters=$(exec_iters "$mib")
            ta=() tb=()
            for _ in $(seq "$rounds"); do
                for which in a b; do
                    bin=$a
                    [ $which = b ] && bin=$b
                    us=$(field median_us "$(mpirun --oversubscribe -n "$n" "$bin" run --mesh "$mesh" \
                        --shape "$((mib * 256))x1024" --from "$from" --to "$to" --iters "$iters" \
                        --warmup 2 --json)")
                    if [ $which = a ]; then ta+=("$us"); else tb+=("$us"); fi
                done
            done
            read -r abest amed <<<"$(printf '%s\n' "${ta[@]}" | stats)"
            read -r bbest bmed <<<"$(printf '%s\n' "${tb[@]}" | stats)"
            awk -v n="$n" -v f="$from" -v t="$to" -v m="$mesh" -v mib="$mib" -v ab="$abest" \
                -v am="$amed" -v bb="$bbest" -v bm="$bmed" \
                'BEGIN { printf "| %s | %s -> %s | %s | %s | %s | %s | %s | %s | %.2f |\n",
                         n, f, t, m, mib, ab, am, bb, bm, bb / ab }' | tee -a "$table"
        done
    done
done
if [ -n "$out" ]; then
    cp "$table" "$out"
    echo "wrote $out"
fi
