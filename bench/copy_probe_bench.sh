#!/usr/bin/env bash
# How still the limit holds: the copy-bandwidth probe (bench/copy_probe.h) run RUNS times,
# each a separate job PAUSE_S seconds after the last, beside the probe as it was (two
# buffers of the size copied back and forth, one median: `copy_bw BYTES ITERS 1 2`), the
# two in turn. Prints a row per run and, per probe, the least and most GB/s a rank and
# their spread, (most - least) / most: what every "x the limit" ratio moves by between runs.
#
# Usage: bash bench/copy_probe_bench.sh
# Env: RANKS=2  SIZE_MIB=64  RUNS=8  PAUSE_S=20  ITERS=10
set -eu
cd "$(dirname "$0")/.."
n=${RANKS:-2}
mib=${SIZE_MIB:-64}
runs=${RUNS:-8}
pause=${PAUSE_S:-20}
iters=${ITERS:-10}
bazel build -c opt //bench:copy_bw >/dev/null 2>&1
bazel shutdown >/dev/null 2>&1 || true # its server's idle work would share the cores
source bench/common.sh
probe=$(pwd)/bazel-bin/bench/copy_bw
bytes=$((mib << 20))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| run | two buffers GB/s/rank | past the caches GB/s/rank (best of 5) | its worst of 5 |"
echo "|---:|---:|---:|---:|"
for k in $(seq "$runs"); do
    [ "$k" -gt 1 ] && sleep "$pause"
    old=$(field rank_gbps "$(mpirun --oversubscribe -n "$n" "$probe" "$bytes" "$iters" 1 2)")
    new=$(mpirun --oversubscribe -n "$n" "$probe" "$bytes" "$iters" 5)
    echo "$old" >>"$work/old"
    field rank_gbps "$new" >>"$work/new"
    echo "| $k | $old | $(field rank_gbps "$new") | $(field rank_gbps_worst "$new") |"
done
spread() { sort -g "$1" | awk 'NR == 1 { lo = $1 } { hi = $1 }
    END { printf "%.2f .. %.2f GB/s a rank, spread %.0f%%", lo, hi, 100 * (hi - lo) / hi }'; }
echo
echo "$n ranks, $mib MiB, $runs runs $pause s apart ($(date -u +%Y-%m-%d), $(nproc) cores):"
echo "- two buffers back and forth (the probe as it was): $(spread "$work/old")"
echo "- past the caches, best of 5 (the probe now): $(spread "$work/new")"
