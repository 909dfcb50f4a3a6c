#!/usr/bin/env bash
# Loading a checkpoint into a layout (issue 62): a generated GPT-2 medium (355M f32, 1.42 GB,
# one safetensors file) loaded into 2x2 on 4 ranks, and into 2 on 2 ranks (a core each),
# side by side in one run, each with the page cache warm and cold (dropped before the run).
# Into fresh buffers (their first-touch page faults on the clock, as a load that allocates)
# and into buffers written before the clock (a framework's preallocated parameters):
#   limit-fresh       each rank reads its blocks' byte count sequentially from the file into
#                     fresh memory of that size, all ranks at once (checkpoint_bench.c)
#   limit-touched     the same into memory written before the clock
#   limit-file        rank 0 alone reads the whole file once (cold: the disk's bound for a
#                     load on one machine, whose ranks share the page cache)
#   dtr               dtr_checkpoint_read_block of every block into fresh buffers (kept)
#   dtr-touched       the same into buffers written before the clock
#   st-whole          the safetensors package: each rank get_tensor (whole), its block cloned
#   st-slice          the package's get_slice of the block, cloned
#   st-slice-touched  its get_slice copied into tensors written before the clock
#   dcp-load          PyTorch DCP loading the model saved from 2 ranks (Shard(0)) into
#                     DTensors of the same placements (resharding on load), fresh (torch.empty)
#   dcp-load-touched  the same into DTensors written before the clock
# Each figure: the slowest rank's seconds, the best of two rounds; peak: the largest rank's
# growth of resident memory (ru_maxrss) beside the bytes of its blocks. "of its limit": the
# limit of the same buffers over the way's seconds; "dtr faster by": the way's seconds over
# dtr's of the same buffers; "of one file read" (cold): limit-file over the way's seconds.
# Writes the Markdown table to OUT (default: stdout).
#
# Usage: bash bench/checkpoint_bench.sh [OUT.md]   (DTR_CKBENCH_DIR: where the 1.4 GB model
#        and the DCP copy go, default /tmp/dtr_ckbench; cold runs need root for drop_caches)
# Env: ROUNDS=2 (best of), CACHES="warm cold" (cold only where drop_caches is writable)
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
    limit* | dtr | dtr-touched) "${launch[@]}" "$bin" "$model" "$rules" "$mesh" "$way" | grep "^RESULT $way " ;;
    dcp-load*) "${launch[@]}" "$py" bench/checkpoint_bench.py "$way" "$dir/dcp" "$rules" "$mesh" | grep '^RESULT' ;;
    *) "${launch[@]}" "$py" bench/checkpoint_bench.py "$way" "$model" "$rules" "$mesh" | grep '^RESULT' ;;
    esac
}

ways=(limit-fresh limit-touched limit-file dtr dtr-touched st-whole st-slice st-slice-touched
      dcp-load dcp-load-touched)
caches=()
for c in ${CACHES:-warm cold}; do
    case $c in
    warm) caches+=(warm) ;;
    cold) [ $cold_ok -eq 1 ] && caches+=(cold) ;;
    *) echo "checkpoint_bench.sh: CACHES: unknown '$c' (warm, cold)" >&2; exit 2 ;;
    esac
done
{
    echo "| ranks | page cache | way | seconds | of its limit | dtr faster by | of one file read | bytes per rank (MB) | peak growth (MB) |"
    echo "|---:|---|---|---:|---:|---:|---:|---:|---:|"
} >"$dir/table"
for cfg in "4 2x2 $dir/r4.json" "2 2 $dir/r2.json"; do
    read -r n mesh rules <<<"$cfg"
    for cache in "${caches[@]}"; do
        declare -A best=() peak=() bytes=()
        for round in $(seq "${ROUNDS:-2}"); do
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
            # a way into buffers written before the clock is held to limit-touched and to
            # dtr-touched; one into fresh buffers to limit-fresh and dtr
            case $way in
            *-touched) lim=${best[limit-touched]} d=${best[dtr-touched]} ;;
            *) lim=${best[limit-fresh]} d=${best[dtr]} ;;
            esac
            awk -v n="$n" -v c="$cache" -v w="$way" -v s="${best[$way]}" -v lim="$lim" \
                -v d="$d" -v f="${best[limit-file]}" -v b="${bytes[$way]}" -v p="${peak[$way]}" 'BEGIN {
                of = w ~ /^limit/ ? "" : sprintf("%.2f", lim / s)
                by = (w ~ /^limit/ || w ~ /^dtr/) ? "" : sprintf("%.2fx", s / d)
                fr = (c == "cold" && w !~ /^limit/) ? sprintf("%.2f", f / s) : ""
                pk = w ~ /^limit/ ? "" : sprintf("%.0f", p)
                printf "| %d | %s | %s | %.3f | %s | %s | %s | %.0f | %s |\n", n, c, w, s, of, by, fr, b / 1e6, pk }' >>"$dir/table"
        done
    done
done
{
    echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); model $(stat -L -c %s "$model") bytes; $(date -u +%Y-%m-%d)."
    [ $cold_ok -eq 1 ] || echo "Cold runs left out: /proc/sys/vm/drop_caches is not writable here."
    echo
    cat "$dir/table"
} >"$out"
