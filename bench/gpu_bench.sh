#!/usr/bin/env bash
# The GPU path's figures (issue 8), for a machine with a GPU: the CUDA kernels' bandwidth as
# a fraction of the memory bandwidth (bench/cuda_bench.c), and the overhead ratio of
# `dtr run` on device buffers (median redistribution / median of the same collectives
# called bare, side by side in one run): NCCL on 1 rank (the collectives of a 1-rank mesh
# are empty: what is left is the executor's own work, against nothing) and with one GPU per
# rank where there are several, and the shared-GPU mode on 2 and 4 ranks.
#
# Usage: bash bench/gpu_bench.sh [OUT.md]   (default docs/gpu-bench.md)
# Without a GPU it prints why and writes nothing. On a machine without Bazel (a lent GPU
# machine), DTR_BIN and CUDA_BENCH_BIN name `dtr` and `cuda_bench` built elsewhere.
set -eu
cd "$(dirname "$0")/.."
out=${1:-docs/gpu-bench.md}
if [ -z "${DTR_BIN:-}" ]; then
    bazel build -c opt //cli:dtr //bench:cuda_bench >/dev/null 2>&1 || {
        echo "gpu_bench: //bench:cuda_bench did not build (is CUDA installed?)"
        exit 1
    }
fi
kernels=$("${CUDA_BENCH_BIN:-bazel-bin/bench/cuda_bench}")
if grep -q 'skipped' <<<"$kernels"; then
    echo "$kernels"
    exit 0
fi
source bench/common.sh
dtr=${DTR_BIN:-$dtr}
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
    echo "| backend | ranks | transition | MiB | exec median us | baseline median us | ratio | verified |"
    echo "|---|---:|---|---:|---:|---:|---:|---|"
} >"$tmp"
run() { # backend ranks from to mib
    local rows=$(($5 * 256))
    local json
    json=$(mpirun --oversubscribe -n "$2" "$dtr" run --mesh "$2" --shape "${rows}x1024" \
        --from "$3" --to "$4" --backend "$1" --device cuda --verify --json --iters 10)
    echo "| $1 | $2 | $3 -> $4 | $5 | $(field median_us "$json") | $(field baseline_median_us "$json") | $(field overhead_ratio "$json") | $(field verified "$json") |" >>"$tmp"
}
for spec in "S(0)|R" "P|S(0)" "S(0)|S(1)" "S(1)|R"; do
    for mib in 16 256; do
        run nccl 1 "${spec%%|*}" "${spec##*|}" "$mib"
        [ "$gpus" -ge 2 ] && run nccl "$gpus" "${spec%%|*}" "${spec##*|}" "$mib"
        run mpi 2 "${spec%%|*}" "${spec##*|}" "$mib"
        run mpi 4 "${spec%%|*}" "${spec##*|}" "$mib"
    done
done
{
    echo "# GPU path: kernel bandwidth and overhead"
    echo
    echo "Measured $(date -u +%Y-%m-%d) with \`bash bench/gpu_bench.sh\` on $(nvidia-smi -L | head -1)."
    echo
    echo "## Kernels (bench/cuda_bench.c)"
    echo
    echo "$kernels"
    echo
    echo "## dtr run on device buffers"
    echo
    cat "$tmp"
} >"$out"
echo "wrote $out"
