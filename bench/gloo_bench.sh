#!/usr/bin/env bash
# The Gloo backend beside the MPI backend, side by side in one run: the same redistributions
# (f32, rows of 1024) timed the same way (warm-up, then the slowest rank's median over the
# iterations), Gloo on processes started by tools/dtr_launch.sh (no MPI) twice, through its
# groups' shared-memory segments (the default on one node) and through Gloo's TCP pairs over
# loopback alone (DTR_GLOO_SHM=0), and the MPI backend by `mpirun dtr run` (shared memory
# inside the node). Every result is checked (Gloo: bench/gloo_bench.c; MPI: dtr run's
# verification).
#
# Usage: bash bench/gloo_bench.sh   (env: RANKS="2 4" SIZES_MIB="4 64")
# Prints a markdown table (docs/executor-bench.md, "The Gloo backend").
set -eu
cd "$(dirname "$0")/.."
ranks=${RANKS:-2 4}
sizes=${SIZES_MIB:-4 64}
bazel build -c opt //cli:dtr //bench:gloo_bench >/dev/null 2>&1
bazel shutdown >/dev/null 2>&1 || true # its server's idle work would share the 2 cores
source bench/common.sh
gloo=$(pwd)/bazel-bin/bench/gloo_bench
echo "| ranks | transition | MiB | received MiB/rank | Gloo TCP ms | Gloo ms | MPI backend ms | Gloo / Gloo TCP | Gloo / MPI | Gloo GB/s received |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $ranks; do
    for spec in 'S(0)|R' 'P|R' 'P|S(0)' 'S(0)|S(1)'; do
        from=${spec%%|*}
        to=${spec##*|}
        for mib in $sizes; do
            rows=$((mib * 256))
            iters=$(exec_iters "$mib")
            t=$(DTR_GLOO_SHM=0 DTR_TIMEOUT_S=120 bash tools/dtr_launch.sh -n "$n" "$gloo" "$n" "${rows}x1024" "$from" "$to" "$iters" 2)
            g=$(DTR_TIMEOUT_S=120 bash tools/dtr_launch.sh -n "$n" "$gloo" "$n" "${rows}x1024" "$from" "$to" "$iters" 2)
            m=$(mpirun --oversubscribe -n "$n" "$dtr" run --mesh "$n" --shape "${rows}x1024" \
                --from "$from" --to "$to" --iters "$iters" --warmup 2 --json)
            [ "$(field verified "$t")" = true ] || { echo "gloo_bench: Gloo TCP result wrong: $t" >&2; exit 1; }
            [ "$(field verified "$g")" = true ] || { echo "gloo_bench: Gloo result wrong: $g" >&2; exit 1; }
            [ "$(field mismatches "$m")" = 0 ] || { echo "gloo_bench: MPI result wrong: $m" >&2; exit 1; }
            tu=$(field median_us "$t")
            gu=$(field median_us "$g")
            mu=$(field median_us "$m")
            rb=$(field recv_bytes_per_rank_max "$g")
            awk -v n="$n" -v t="$from -> $to" -v mib="$mib" -v rb="$rb" -v tu="$tu" -v gu="$gu" -v mu="$mu" 'BEGIN {
                printf "| %d | %s | %d | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", n, t, mib,
                    rb / 1048576, tu / 1000, gu / 1000, mu / 1000, gu / tu, gu / mu, rb / gu / 1000 }'
        done
    done
done
