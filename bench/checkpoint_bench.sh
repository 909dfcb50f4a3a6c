#!/usr/bin/env bash
# Loading a checkpoint into a layout (issue 62): a generated GPT-2 medium (355M f32, 1.42 GB,
# one safetensors file) loaded into 2x2 on 4 ranks, and into 2 on 2 ranks (a core each),
# side by side in one run, each with the page cache warm and cold (dropped before the run):
#   limit        each rank's bytes read sequentially from the file through a 16 MiB buffer,
#                all ranks at once (checkpoint_bench.c): the file system's rate, now
#   dtr          dtr_checkpoint_read_block of every block into fresh buffers (kept)
#   dtr-touched  the same into buffers written before the clock (preallocated parameters)
#   st-whole     the safetensors package: each rank get_tensor (whole), its block cloned
#   st-slice     the safetensors package's get_slice of the block, cloned
#   dcp-load     PyTorch DCP loading the model saved from 2 ranks (Shard(0)) into DTensors
#                of the same placements (resharding on load)
# Each figure: the slowest rank's seconds, the best of two rounds; peak: the largest rank's
# growth of resident memory (ru_maxrss) beside the bytes of its blocks. Writes the Markdown
# table to OUT (default: stdout).
#
# Usage: bash bench/checkpoint_bench.sh [OUT.md]   (DTR_CKBENCH_DIR: where the 1.4 GB model
#        and the DCP copy go, default /tmp/dtr_ckbench; cold runs need root for drop_caches)
set -eu
cd "$(dirname "$0")/.."
out=${1:-/dev/stdout}
dir=${DTR_CKBENCH_DIR:-/tmp/dtr_ckbench}
mkdir -p "$dir"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bazel build -c opt //bench:checkpoint_bench >/dev/null 2>&1
bin=bazel-bin/bench/checkpoint_bench
py=$(bash bench/pytorch/venv.sh)
"$py" -c 'import safetensors' 2>/dev/null || "$(dirname "$py")/pip" install -q safetensors
model=$dir/gpt2m.safetensors
[ -f "$model" ] || "$py" bench/checkpoint_bench.py gen "$model"
[ -d "$dir/dcp" ] || mpirun --oversubscribe -n 2 "$py" bench/checkpoint_bench.py dcp-save "$model" "$dir/dcp"
cat >"$dir/r4.json" <<'JSON'
[{"match": "*.c_attn.weight", "placements": "S(0),S(1)"},
 {"match": "*.c_fc.weight", "placements": "S(0),S(1)"},
 {"match": "*.c_proj.weight", "placements": "S(1),S(0)"},
 {"match": "*.c_attn.bias", "placements": "R,S(0)"},
 {"match": "*.c_fc.bias", "placements": "R,S(0)"},
 {"match": "w[tp]e.weight", "placements": "S(0),R"},
 {"match": "*", "placements": "R,R"}]
JSON
cat >"$dir/r2.json" <<'JSON'
[{"match": "*.c_attn.weight", "placements": "S(1)"},
 {"match": "*.c_fc.weight", "placements": "S(1)"},
 {"match": "*.c_proj.weight", "placements": "S(0)"},
 {"match": "*.c_attn.bias", "placements": "S(0)"},
 {"match": "*.c_fc.bias", "placements": "S(0)"},
 {"match": "w[tp]e.weight", "placements": "S(0)"},
 {"match": "*", "placements": "R"}]
JSON
cold_ok=0
if sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then cold_ok=1; fi

# one WAY RANKS MESH RULES CACHE: the RESULT line of one run
one() {
    local way=$1 n=$2 mesh=$3 rules=$4 cache=$5 launch
    if [ "$cache" = cold ]; then sync; echo 3 >/proc/sys/vm/drop_caches; else cat "$model" >/dev/null; fi
    if [ "$n" -eq 2 ]; then launch=(mpirun --bind-to core -n 2); else launch=(mpirun --oversubscribe -n "$n"); fi
    case $way in
    limit | dtr | dtr-touched) "${launch[@]}" "$bin" "$model" "$rules" "$mesh" "$way" | grep "^RESULT $way " ;;
    dcp-load) "${launch[@]}" "$py" bench/checkpoint_bench.py dcp-load "$dir/dcp" "$rules" "$mesh" | grep '^RESULT' ;;
    *) "${launch[@]}" "$py" bench/checkpoint_bench.py "$way" "$model" "$rules" "$mesh" | grep '^RESULT' ;;
    esac
}

ways=(limit dtr dtr-touched st-whole st-slice dcp-load)
caches=(warm)
[ $cold_ok -eq 1 ] && caches+=(cold)
{
    echo "| ranks | page cache | way | seconds | of the limit | dtr faster by | bytes per rank (MB) | peak growth (MB) |"
    echo "|---:|---|---|---:|---:|---:|---:|---:|"
} >"$dir/table"
for cfg in "4 2x2 $dir/r4.json" "2 2 $dir/r2.json"; do
    read -r n mesh rules <<<"$cfg"
    for cache in "${caches[@]}"; do
        declare -A best=() peak=() bytes=()
        for round in 1 2; do
            for way in "${ways[@]}"; do
                read -r _ name _ secs b mb _ <<<"$(one "$way" "$n" "$mesh" "$rules" "$cache")"
                if [ -z "${best[$way]:-}" ] || awk -v a="$secs" -v b="${best[$way]}" 'BEGIN{exit !(a<b)}'; then
                    best[$way]=$secs
                fi
                peak[$way]=$mb
                bytes[$way]=$b
            done
        done
        for way in "${ways[@]}"; do
            awk -v n="$n" -v c="$cache" -v w="$way" -v s="${best[$way]}" -v lim="${best[limit]}" \
                -v d="${best[dtr]}" -v b="${bytes[$way]}" -v p="${peak[$way]}" 'BEGIN {
                of = w == "limit" ? "1" : sprintf("%.2f", lim / s)
                by = (w == "limit" || w ~ /^dtr/) ? "" : sprintf("%.2fx", s / d)
                pk = w == "limit" ? "" : sprintf("%.0f", p)
                printf "| %d | %s | %s | %.3f | %s | %s | %.0f | %s |\n", n, c, w, s, of, by, b / 1e6, pk }' >>"$dir/table"
        done
    done
done
{
    echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); model $(stat -L -c %s "$model") bytes; $(date -u +%Y-%m-%d)."
    [ $cold_ok -eq 1 ] || echo "Cold runs left out: /proc/sys/vm/drop_caches is not writable here."
    echo
    cat "$dir/table"
} >"$out"
