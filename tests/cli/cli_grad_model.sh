#!/usr/bin/env bash
# `dtr grad --model`: a model's gradients per tensor, as parameter groups (pipelined) and by
# the bare baseline; both real ways verified exactly in every mode and reduce dtype on 8
# ranks; the collective counts; the built-in GPT-2 small list; the usage errors.
# Usage: cli_grad_model.sh DTR
set -u
dtr=$1
source "$(dirname "$0")/check_lib.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir" "$out" "$err"' EXIT

# Five parameters in three groups: uneven rows, a tiny one, an empty one (its own group).
cat >"$dir/model.json" <<'JSON'
[{"shape": "100x7", "group": "a"}, {"shape": "13", "group": "a"},
 {"shape": "3x5", "group": "b"}, {"shape": "0x4"}, {"shape": "1003", "group": "b"}]
JSON

# On a GPU: the model's buffers on CUDA memory (8 ranks sharing it: the shared-GPU mode),
# NCCL on one rank, and GPT-2 small's 124M elements (elsewhere the reason, exit 2 or 1).
# DTR_GPU_ONLY=1 runs these alone (the GPU pack, tools/gpu_pack_run.sh).
gpu_checks() {
    for mode in ddp fsdp hsdp; do
        gpu_check "--model, $mode bf16 on CUDA memory, 8 ranks" 8 grad --mode $mode --mesh 2x4 \
            --model "$dir/model.json" --dtype bf16 --microbatches 2 --iters 1 --device cuda \
            --verify --json
    done
    gpu_check "--model, fsdp f32 on nccl, world size 1" 1 grad --mode fsdp --mesh 1 \
        --model "$dir/model.json" --iters 1 --backend nccl --verify --json
    gpu_check "--model gpt2-small, hsdp on CUDA memory, 2 ranks" 2 grad --mode hsdp --mesh 1x2 \
        --model gpt2-small --iters 2 --device cuda --verify --json
}
if [ -n "${DTR_GPU_ONLY:-}" ]; then
    gpu_checks
    finish "cli grad --model (GPU checks)"
    exit
fi

mi=0
for mode in ddp fsdp hsdp; do
    mi=$((mi + 1))
    di=0
    for dt in f32 bf16 f16; do
        di=$((di + 1))
        pair_skipped "$mi" "$di" && continue # each mode and dtype once (check_lib.sh)
        check "$mode $dt, 2 microbatches, both ways exact" 8 0 '"verified":true,"max_abs_err":0,' "" \
            grad --mode $mode --mesh 2x4 --model "$dir/model.json" --dtype $dt --microbatches 2 \
            --iters 1 --verify --json
    done
done
check "hsdp JSON: params, groups, ops, collective counts" 8 0 \
    '"mode":"hsdp","dtype":"f32","backend":"mpi","device":"cpu","microbatches":2,"params":5,"numel":1731,"ngroups":3,"ops":["reduce_scatter:avg","all_reduce:avg"],"collectives":{"per_tensor":15,"grouped":9,"baseline":3}' "" \
    grad --mode hsdp --mesh 2x4 --model "$dir/model.json" --microbatches 2 --iters 1 --json
check "fsdp: no all-reduce" 8 0 '"ops":["reduce_scatter:avg"],"collectives":{"per_tensor":5,"grouped":3,"baseline":1}' "" \
    grad --mode fsdp --mesh 8 --model "$dir/model.json" --iters 1 --json
check "text summary" 8 0 "verified: both ways, every element of every shard on every rank is the mean over 8 ranks and 2 microbatches" "" \
    grad --mode hsdp --mesh 2x4 --model "$dir/model.json" --microbatches 2 --iters 2 --verify
check "timings in JSON" 4 0 '"per_tensor_median_us":' "" \
    grad --mode hsdp --mesh 2x2 --model "$dir/model.json" --iters 2 --json
# DDP with a small group after a larger one (a bias beside a matrix): the small one's
# all-reduce started while the larger one's was in flight on the same group, which the MPI
# backend's shared-memory segment refused ("the group's previous operation never completed").
echo '[{"shape":"2048","group":"h.0"},{"shape":"100"}]' >"$dir/small.json"
for n in 2 4; do
    check "ddp, a small parameter after a large one, $n ranks" $n 0 '"verified":true,' "" \
        grad --mode ddp --mesh $n --model "$dir/small.json" --iters 1 --verify --json
done
# GPT-2 small's list, on one rank (its 124M elements fit there; the 8-rank run is the
# benchmark in docs/executor-bench.md).
# --iters 0: the checked round only (no timing lines); --warmup as without --model
check "--iters 0: verified, no medians" 2 0 "mean over 2 ranks and 1 microbatch" "" \
    grad --mode ddp --mesh 2 --model "$dir/small.json" --iters 0 --verify
check "--warmup 0 --iters 2 in JSON" 2 0 '"verified":true,"max_abs_err":0,"abs_tolerance":3.81469727e-06,"iters":2,"warmup":0,' "" \
    grad --mode fsdp --mesh 2 --model "$dir/small.json" --warmup 0 --iters 2 --verify --json
check "--warmup -1" 2 2 "" "dtr grad: --warmup: '-1' is not a count 0..100000" \
    grad --mode ddp --mesh 2 --model "$dir/small.json" --warmup -1
check "gpt2-small: 148 tensors, 124439808 elements, 13 groups" 1 0 \
    '"params":148,"numel":124439808,"ngroups":13,' "" \
    grad --mode fsdp --mesh 1 --model gpt2-small --iters 1 --verify --json

# Usage errors: one line from rank 0, exit 2.
check "no such file" 2 2 "" "--model: cannot open '$dir/none.json': No such file or directory" \
    grad --mode fsdp --mesh 2 --model "$dir/none.json"
check "a directory" 2 2 "" "--model: '$dir' is a directory, not a JSON file" \
    grad --mode fsdp --mesh 2 --model "$dir"
echo '[{"shape": ""}]' >"$dir/scalar.json"
check "a scalar parameter" 2 2 "" "entry 0: shape: '' is a scalar; a parameter has 1 or more dims" \
    grad --mode ddp --mesh 2 --model "$dir/scalar.json"
echo '[{"shape": "4"}, {"shape": [1099511627776, 1099511627776]}]' >"$dir/huge.json"
check "a parameter past int64 bytes" 2 2 "" "entry 1: shape: dtr_shape_bytes: shape: the tensor's byte size (f32, 2 dims) overflows int64" \
    grad --mode ddp --mesh 2 --model "$dir/huge.json"
echo '[{"shape": "4", "dtype": "f32"}]' >"$dir/key.json"
check "unknown key" 2 2 "" "--model $dir/key.json: line 1, entry 0: unknown key \"dtype\" (shape, group)" \
    grad --mode fsdp --mesh 2 --model "$dir/key.json"
echo '[]' >"$dir/empty.json"
check "empty list" 2 2 "" "the list is empty" grad --mode fsdp --mesh 2 --model "$dir/empty.json"
echo '[{"shape": "4x-1"}]' >"$dir/shape.json"
check "bad shape" 2 2 "" "entry 0: shape:" grad --mode fsdp --mesh 2 --model "$dir/shape.json"
check "--shape with --model" 2 2 "" "--shape: not with --model" \
    grad --mode fsdp --mesh 2 --model gpt2-small --shape 4
check "mesh smaller than the job" 4 2 "" "--mesh: 2 ranks, the job has 4" \
    grad --mode fsdp --mesh 2 --model "$dir/model.json"
check "hsdp on a 1-D mesh" 2 2 "" "hsdp needs a mesh of 2 or more dims" \
    grad --mode hsdp --mesh 2 --model "$dir/model.json"
check "bad --dtype" 2 2 "" "--dtype: 'f64', must be f32, bf16 or f16" \
    grad --mode fsdp --mesh 2 --model "$dir/model.json" --dtype f64
check "bad --iters" 2 2 "" "dtr grad: --iters: '-3' is not a count 0..100000" \
    grad --mode fsdp --mesh 2 --model "$dir/model.json" --iters -3
check "help lists --model" 0 0 "--model gpt2-small" "" grad --help
check "--help after --model's flags, without MPI" 0 0 "usage: mpirun -n N dtr grad" "" \
    grad --mode fsdp --mesh 2 --model gpt2-small --iters 3 --help
check "--model with --device cpu" 2 0 '"verified":true' "" \
    grad --mode fsdp --mesh 2 --model "$dir/model.json" --device cpu --verify --json --iters 1
check "backend and device in JSON" 2 0 '"backend":"mpi","device":"cpu",' "" \
    grad --mode fsdp --mesh 2 --model "$dir/model.json" --iters 1 --json
gpu_checks
finish "cli grad --model"
