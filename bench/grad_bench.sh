#!/usr/bin/env bash
# A whole model's gradient reduction, side by side in one run (for each mode and dtype, on
# RANKS ranks): dtr grouped (parameter groups through the pipeline), dtr per tensor (one
# reducer per parameter), the bare collectives (one reduce-scatter / all-reduce of every
# element in the reduce dtype: `dtr grad`'s baseline), the memory limit (the least bytes each
# rank must touch over the copy bandwidth of bench/copy_bw.c, measured in the same run), and
# PyTorch's own path on CPU (bench/grad_bench_torch.py: DDP's 25 MiB buckets through its
# hooks, FSDP2's reduce-scatter, over gloo; torch from bench/pytorch/venv.sh).
#
# Least bytes per rank (N elements, f32 parameters): ddp reads its gradients and writes the
# mean (8N bytes); fsdp reads its gradients and writes its shard (4N + 4N/n); hsdp the same
# as fsdp. Every dtr figure is `dtr grad --json`'s median (the slowest rank's time of each
# step after a warm-up round), every element verified.
#
# Usage: bash bench/grad_bench.sh        (a markdown table on stdout)
# Env: RANKS="2"  MODES="ddp fsdp hsdp" (hsdp on 4 or more ranks: mesh 2 x n/2)
#      DTYPES="f32 bf16 f16"  ITERS=5
#      MODELS="gpt2-small bench/gpt2_medium.json" (gpt2-small is built in; a model file is a
#      JSON list of {"shape", "group"}: bench/gpt2_medium.json is GPT-2 medium, 355M)
#      TORCH=0 leaves PyTorch out
set -eu
cd "$(dirname "$0")/.."
bazel build -c opt //cli:dtr //bench:copy_bw >/dev/null 2>&1
. bench/common.sh
ranks=${RANKS:-2} modes=${MODES:-ddp fsdp hsdp} dtypes=${DTYPES:-f32 bf16 f16}
iters=${ITERS:-5} models=${MODELS:-${MODEL:-gpt2-small bench/gpt2_medium.json}}
py=""
if [ "${TORCH:-1}" != 0 ]; then
    py=$(bash bench/pytorch/venv.sh)
    "$(dirname "$py")/pip" install -q mpi4py >&2
fi
echo "\`bash bench/grad_bench.sh\` (RANKS=\"$ranks\" MODELS=\"$models\" ITERS=$iters) on $(date -u +%Y-%m-%d), $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p')"
echo
echo "| model | ranks | mode | dtype | dtr grouped ms | dtr per tensor ms | bare collectives ms | memory limit ms | PyTorch gloo ms | grouped / bare | bare / limit | PyTorch / grouped |"
echo "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for model in $models; do
for r in $ranks; do
    bind=(--bind-to core)
    [ "$r" -le "$(nproc)" ] || bind=(--bind-to none)
    gbps=$(field rank_gbps "$(mpirun --oversubscribe -n "$r" "${bind[@]}" bazel-bin/bench/copy_bw $((64 << 20)) 10)")
    for mode in $modes; do
        mesh=$r
        if [ "$mode" = hsdp ]; then
            [ "$r" -ge 4 ] || continue
            mesh=2x$((r / 2))
        fi
        for d in $dtypes; do
            j=$(mpirun --oversubscribe -n "$r" "${bind[@]}" "$dtr" grad --mode "$mode" --mesh "$mesh" \
                --model "$model" --dtype "$d" --iters "$iters" --verify --json | tail -1)
            numel=$(field numel "$j")
            g=$(field grouped_median_us "$j") p=$(field per_tensor_median_us "$j") b=$(field baseline_median_us "$j")
            t="-"
            if [ -n "$py" ] && [ "$mode" != hsdp ]; then
                t=$(field median_us "$(mpirun --oversubscribe -n "$r" "${bind[@]}" "$py" bench/grad_bench_torch.py \
                    "$mode" "$d" "$numel" "$iters" 2>/dev/null | tail -1)")
            fi
            python3 - "$r" "$mode" "$d" "$g" "$p" "$b" "$t" "$numel" "$gbps" "$(basename "$model" .json)" <<'PY'
import sys
r, mode, d, g, p, b, t, numel, gbps, model = sys.argv[1:]
r, numel, gbps = int(r), int(numel), float(gbps)
least = 8 * numel if mode == "ddp" else 4 * numel * (1 + 1 / r)
limit = least / (gbps * 1e9) * 1e3
g, p, b = float(g) / 1e3, float(p) / 1e3, float(b) / 1e3
tt = "-" if t in ("-", "") else "%.1f" % (float(t) / 1e3)
vs = "-" if tt == "-" else "%.2f" % (float(t) / 1e3 / g)
print(f"| {model} | {r} | {mode} | {d} | {g:.1f} | {p:.1f} | {b:.1f} | {limit:.1f} | {tt} | {g / b:.2f} | {b / limit:.2f} | {vs} |")
PY
        done
    done
done
done
