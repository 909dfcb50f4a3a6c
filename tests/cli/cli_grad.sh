#!/usr/bin/env bash
# `dtr grad`: the dry run's factors (no MPI), every mode x reduce dtype on 8 ranks verified
# exactly, HSDP accumulation, fp16 near 60000, and the usage errors (one stderr line from
# rank 0 only, exit 2).
# Usage: cli_grad.sh DTR
set -u
dtr=$1
source "$(dirname "$0")/check_lib.sh"

# The dry run: docs/design.md's factors, no MPI.
check "dry run N=12 f16" 0 0 "divide by 12: pre 4, post 3; ops: reduce_scatter:sum" "" \
    grad --dry-run --world 12 --dtype f16
check "dry run N=6 f16 (fractional post)" 0 0 '"pre_factor":4,"post_factor":1.5' "" \
    grad --dry-run --world 6 --dtype f16 --json
check "dry run f32: AVG, nothing divided" 0 0 '"pre_factor":1,"post_factor":1,"ops":["reduce_scatter:avg"]' "" \
    grad --dry-run --world 8 --dtype f32 --json
check "dry run hsdp 2x4 f16" 0 0 '"world":8,"shard_group":4,"replicate_group":2,"dtype":"f16","factor":8,"pre_factor":4,"post_factor":2,"ops":["reduce_scatter:sum","all_reduce:sum"]' "" \
    grad --dry-run --mode hsdp --mesh 2x4 --dtype f16 --json
check "dry run user factor on f32: SUM, pre-divide" 0 0 '"factor":3,"pre_factor":3,"post_factor":1,"ops":["reduce_scatter:sum"]' "" \
    grad --dry-run --world 8 --factor 3 --json
check "dry run force-sum on bf16: post-divide" 0 0 '"pre_factor":1,"post_factor":8,"ops":["reduce_scatter:sum"]' "" \
    grad --dry-run --world 8 --dtype bf16 --force-sum --json
check "dry run ddp: divide by N first" 0 0 '"pre_factor":8,"post_factor":1,"ops":["all_reduce:sum"]' "" \
    grad --dry-run --mode ddp --world 8 --dtype f16 --json
check "help without MPI" 0 0 "usage: mpirun -n N dtr grad" "" grad --help

# Every mode and reduce dtype on 8 ranks, 2 microbatches: exact means.
mi=0
for mode in ddp fsdp hsdp; do
    mi=$((mi + 1))
    di=0
    for dt in f32 bf16 f16; do
        di=$((di + 1))
        pair_skipped "$mi" "$di" && continue # each mode and dtype once (check_lib.sh)
        check "$mode $dt, 2 microbatches" 8 0 '"verified":true,"max_abs_err":0,"nonfinite":false' "" \
            grad --mode $mode --mesh 2x4 --dtype $dt --numel 100003 --microbatches 2 --verify --json
    done
done
check "hsdp JSON keys" 8 0 '"mesh":[2,4],"mode":"hsdp","world":8,"shard_group":4,"replicate_group":2,"dtype":"f16","factor":8,"pre_factor":4,"post_factor":2,"ops":["reduce_scatter:sum","all_reduce:sum"]' "" \
    grad --mode hsdp --mesh 2x4 --dtype f16 --numel 1000 --verify --json
check "fsdp, later shard dim, uneven" 8 0 '"verified":true,"max_abs_err":0' "" \
    grad --mode fsdp --mesh 8 --shape 3x13x5 --shard-dim 1 --dtype bf16 --verify --json
check "fsdp f64" 8 0 '"verified":true,"max_abs_err":0' "" \
    grad --mode fsdp --mesh 2x4 --dtype f64 --numel 1001 --verify --json
check "text summary" 8 0 "verified: every element on every rank is the mean over 8 ranks and 2 microbatches" "" \
    grad --mode hsdp --mesh 2x4 --numel 1000 --microbatches 2 --verify
check "ddp f16 near 60000: no overflow" 8 0 '"verified":true,"max_abs_err":0,"nonfinite":false' "" \
    grad --mode ddp --mesh 8 --dtype f16 --base 59904 --step 256 --numel 4096 --verify --json
check "hsdp f16 near 28672 (pre 4 keeps it): exact" 8 0 '"verified":true,"max_abs_err":0,"nonfinite":false' "" \
    grad --mode hsdp --mesh 2x4 --dtype f16 --base 28672 --step 256 --numel 4096 --verify --json
check "hsdp f16 near 60000 is past the pre/post limit: reported, exit 1" 8 1 '"nonfinite":true' "overflowed" \
    grad --mode hsdp --mesh 2x4 --dtype f16 --base 59904 --step 256 --numel 4096 --verify --json
check "user factor 4: the sum over 8 ranks divided by 4" 8 0 '"factor":4,"pre_factor":4,"post_factor":1,"ops":["reduce_scatter:sum"]' "" \
    grad --mode fsdp --mesh 2x4 --factor 4 --numel 1000 --verify --json
check "user factor 4 verified exactly" 8 0 '"verified":true,"max_abs_err":0' "" \
    grad --mode hsdp --mesh 2x4 --factor 4 --numel 1000 --microbatches 2 --verify --json
check "user factor text" 8 0 "is the sum over 8 ranks and 1 microbatch divided by 4" "" \
    grad --mode fsdp --mesh 2x4 --factor 4 --numel 1000 --verify

# Usage errors: one line from rank 0, exit 2.
check "missing --mode" 2 2 "" "--mode: missing" grad --mesh 2
check "bad --mode" 2 2 "" "--mode: 'zero' is not ddp, fsdp or hsdp" grad --mode zero --mesh 2
check "hsdp on a 1-D mesh" 2 2 "" "hsdp needs a mesh of 2 or more dims" grad --mode hsdp --mesh 2
check "--factor with ddp" 2 2 "" "--factor: the DDP hooks divide by the world size" grad --mode ddp --mesh 2 --factor 2
check "mesh larger than the job" 2 2 "" "run under 'mpirun -n 8'" grad --mode fsdp --mesh 2x4
check "--world without --dry-run" 2 2 "" "--world: only with --dry-run" grad --mode fsdp --mesh 2 --world 2
check "bad --dtype" 2 2 "" "--dtype: i32, must be f32, bf16, f16 or f64" grad --mode fsdp --mesh 2 --dtype i32
check "bad --microbatches" 2 2 "" "--microbatches: '0'" grad --mode fsdp --mesh 2 --microbatches 0
check "bad --factor" 2 2 "" "--factor: '-1' is not a number > 0" grad --mode fsdp --mesh 2 --factor -1
check "--shard-dim past the shape" 2 2 "" "--shard-dim: 1, the gradient has dims 0..0" grad --mode fsdp --mesh 2 --numel 10 --shard-dim 1
check "--numel and --shape" 2 2 "" "--numel and --shape: give one" grad --mode fsdp --mesh 2 --numel 10 --shape 2x5
# sizes past what can be held, refused before anything is allocated (the first crashed, the
# second wrapped to "0 elements")
check "--shape past int64 bytes" 1 2 "" "--shape: dtr_shape_bytes: shape: the tensor's byte size (f32, 2 dims) overflows int64" \
    grad --mode ddp --mesh 1 --shape 2147483648x2147483648
check "--shape whose elements wrap" 1 2 "" "--shape: dtr_shape_bytes: shape: the tensor's byte size (f32, 4 dims) overflows int64" \
    grad --mode ddp --mesh 1 --shape 65536x65536x65536x65536
check "--shape a scalar" 1 2 "" "--shape: '' is a scalar; a gradient has 1 or more dims" \
    grad --mode ddp --mesh 1 --shape ''
# out of memory: one line for both ranks, naming the bytes (under AddressSanitizer, whose
# allocator refuses such sizes by aborting unless told to return NULL as malloc does)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:allocator_may_return_null=1} \
    check "out of memory, named once" 2 1 "" "dtr grad: ranks 0-1: the gradient: out of memory for 4398046511108 bytes" \
    grad --mode ddp --mesh 2 --shape 1048576x1048576 --iters 0
check "dry run needs --world" 0 2 "" "--dry-run needs --world N" grad --dry-run
check "dry run hsdp needs --mesh" 0 2 "" "give --mesh RxS" grad --dry-run --mode hsdp --world 8
check "dry run --world vs --mesh" 0 2 "" "--world: 6, but --mesh 2x4 has 8 ranks" grad --dry-run --world 6 --mesh 2x4
check "unknown flag" 2 2 "" "--bogus" grad --mode fsdp --mesh 2 --bogus
check "bad --device" 2 2 "" "dtr grad: --device: 'tpu' is not cpu or cuda" \
    grad --mode fsdp --mesh 2 --device tpu
check "bad --backend" 2 2 "" "dtr grad: --backend: 'ucx' is not mpi, gloo or nccl" \
    grad --mode fsdp --mesh 2 --backend ucx
check "nccl on cpu buffers" 2 2 "" "dtr grad: --backend nccl: runs on GPU buffers only" \
    grad --mode fsdp --mesh 2 --backend nccl --device cpu
check "--device cpu is the MPI path" 2 0 '"backend":"mpi","device":"cpu","verified":true' "" \
    grad --mode fsdp --mesh 2 --numel 1001 --device cpu --verify --json

# On a GPU: every mode on CUDA memory (8 ranks sharing it: MPI staged through host, the
# casts, divides and accumulation as kernels), and NCCL on one rank.
for mode in ddp fsdp hsdp; do
    for dt in f32 bf16 f16; do
        mesh=8
        [ $mode = hsdp ] && mesh=2x4
        gpu_check "$mode $dt on CUDA memory, 8 ranks" 8 grad --mode $mode --mesh $mesh \
            --dtype $dt --microbatches 2 --numel 100003 --device cuda --verify --json
    done
done
gpu_check "hsdp f32 factor 3 (a pre-multiplied SUM where the backend has one)" 8 grad \
    --mode hsdp --mesh 2x4 --factor 3 --numel 100003 --device cuda --verify --json
gpu_check "fsdp bf16 on nccl, world size 1" 1 grad --mode fsdp --mesh 1 --dtype bf16 \
    --numel 100003 --backend nccl --verify --json

# Timed as dtr run times: the checked round, then --warmup, then the median of --iters beside
# the step's collectives alone; bad counts named; progress on stderr (DTR_PROGRESS_S=0: every
# round) saying what is done and what is left
check "timing: the medians in the JSON" 4 0 '"iters":2,"warmup":1,"median_us":' "" \
    grad --mode hsdp --mesh 2x2 --numel 4096 --verify --iters 2 --json
check "timing: --iters 0 times nothing" 2 0 '"iters":0,"warmup":1,"median_us":0.000,"baseline_median_us":0.000' "" \
    grad --mode ddp --mesh 2 --numel 4096 --verify --iters 0 --json
check "timing: the text" 2 0 "  median of 3 after 2 warm-up: " "" \
    grad --mode fsdp --mesh 2 --numel 4096 --iters 3 --warmup 2
check "timing: --iters -1 is refused by name" 2 2 "" "dtr grad: --iters: " \
    grad --mode fsdp --mesh 2 --iters -1
check "timing: --warmup x is refused by name" 2 2 "" "dtr grad: --warmup: " \
    grad --mode fsdp --mesh 2 --warmup x
progress=$(DTR_PROGRESS_S=0 timeout 120 "${mpirun[@]}" -n 2 "$dtr" grad --mode fsdp --mesh 2 \
    --numel 4096 --iters 3 --warmup 1 2>&1 >/dev/null)
if grep -qx "dtr grad: timed rounds: 1 of 4 done, 3 left (0 s)" <<<"$progress" &&
    grep -qx "dtr grad: timed rounds: 3 of 4 done, 1 left (0 s)" <<<"$progress" &&
    [ "$(grep -c 'timed rounds' <<<"$progress")" -eq 3 ]; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: progress on stderr: $progress"
fi

with_bad_rank 1 "a bad argument on rank 1 alone" 2 2 "" \
    'dtr grad: rank 1: --shape: dtr_shape_parse: text "9xq"' grad --mode ddp --mesh 2 --iters 1
# (the message names --device: a build without CUDA refuses --device cuda by name instead)
with_rank_args 0 "--device cuda" "--device cpu" "--device cuda on one rank alone" 2 2 "" \
    "--device" \
    grad --mode ddp --mesh 2 --numel 1001 --iters 1
with_bad_rank 3 "fsdp: a bad argument on rank 3 alone" 4 2 "" \
    'dtr grad: rank 3: --shape: dtr_shape_parse: text "9xq"' grad --mode fsdp --mesh 4 --iters 1

finish "dtr grad"
