#!/usr/bin/env bash
# Packs what the GPU checks need onto a lent GPU machine that has CUDA, NCCL (PyTorch's
# wheel) and Python but no Bazel, Criterion or Debian's Open MPI (issue 25's recipe).
#
#   bash tools/gpu_device_pack.sh [DIR]      (default .dev; add it to .git/info/exclude)
#
# builds (-c opt, with CUDA) dtr, cuda_bench, the executor's random-case binary, the gradient
# reduction's tests (grad, group, premul) and nccl_adopt_test, copies them to DIR/bin (with
# Criterion's libraries in DIR/lib2), Open MPI's and PMIx's files as Debian lays them out to
# DIR/root (copied over / there without replacing anything), and writes DIR/run.sh, which
# on the GPU machine runs, part by part (PARTS="..." picks some; the default all but cli):
#   info     the device, and the architectures the binaries carry (cuobjdump)
#   kernels  cuda_bench: divide, cast and add checked bit for bit against the host, then the
#            kernels' table; with DIR/bin/cuda_bench_before (another build, put there by
#            hand; kept across packs) the two alternate, before and after
#   grad     grad_mpi_test and group_mpi_test with DTR_TEST_SPACE=cuda on 8 ranks
#   nccl     the random cases on NCCL contexts made without MPI: --backend nccl-id, nccl-comm
#   adopt    nccl_adopt_test (a one-rank world each way, a plan on device memory)
#   model    cli_grad_model.sh: dtr grad --model on CUDA memory and NCCL, GPT-2 small
#   exec     mpi_exec_gpu_test.sh: the random cases on NCCL (1 rank) and shared GPU (2, 4)
#   premul   NCCL's pre-multiplied sums (1 rank), the reduction on CUDA memory (8 ranks)
#   checkpoint  space_test with DTR_TEST_SPACE=cuda: checkpoint blocks read into device
#            memory through host staging (dtr_checkpoint_read_block_to), every byte checked
#   bench    bench/gpu_bench.sh (docs/gpu-bench.md's tables)
#   cli      cli_run.sh's and cli_grad.sh's checks, GPU ones included
# leaving each part's log in $OUT. Then, with the device tool: run `bash DIR/run.sh`
# carrying DIR.
set -eu
cd "$(dirname "$0")/.."
dir=${1:-.dev}
case "$dir" in
/* | ../* | *..*)
    echo "gpu_device_pack: DIR '$dir': a path inside the checkout (it travels with it)" >&2
    exit 2
    ;;
esac
bins=(//tools:dtr //bench:cuda_bench //tests/redistribute/executor:mpi_exec_test_bin
    //tests/autograd:premul_mpi_test_bin //tests/autograd:grad_mpi_test_bin
    //tests/autograd:group_mpi_test_bin //tests/cuda:nccl_adopt_test
    //tests/checkpoint:space_test)
bazel build -c opt "${bins[@]}" >/dev/null
ldd bazel-bin/tools/dtr | grep -q libcudart || {
    echo "gpu_device_pack: bazel-bin/tools/dtr was built without CUDA (nvcc not found?)" >&2
    exit 1
}
# only what this script writes: anything else kept in DIR (notes, logs) stays
before=
if [ -f "$dir/bin/cuda_bench_before" ]; then
    before=$(mktemp)
    cp "$dir/bin/cuda_bench_before" "$before"
fi
rm -rf "$dir/bin" "$dir/lib" "$dir/lib2" "$dir/root" "$dir/run.sh"
mkdir -p "$dir/bin" "$dir/lib" "$dir/lib2" "$dir/root/usr/lib/x86_64-linux-gnu" \
    "$dir/root/usr/bin" "$dir/root/etc" "$dir/root/usr/share"
for t in "${bins[@]}"; do
    p=${t#//}
    cp -L "bazel-bin/${p%%:*}/${p##*:}" "$dir/bin/"
done
if [ -n "$before" ]; then mv "$before" "$dir/bin/cuda_bench_before"; fi
# Criterion's libraries and those of theirs a stock Ubuntu lacks (the rest are there)
ldd "$dir/bin/nccl_adopt_test" | awk '/=> \//{print $3}' |
    grep -E '/lib(criterion|git2|nanomsg|mbed[a-z0-9]*|http_parser|ssh2)\.so' |
    xargs -r -I{} cp -L {} "$dir/lib2/"
cp -L /usr/local/cuda/lib64/libcudart.so.13 "$dir/lib/"
# the checkpoint module's (libjansson4 and libxxhash0 may be missing on the GPU machine)
cp -L /usr/lib/x86_64-linux-gnu/libjansson.so.4 /usr/lib/x86_64-linux-gnu/libxxhash.so.0 "$dir/lib/"
lib=/usr/lib/x86_64-linux-gnu
cp -a "$lib"/libmpi.so.40* "$lib"/libopen-rte.so.40* "$lib"/libopen-pal.so.40* \
    "$lib"/libhwloc.so.15* "$lib"/libevent_core-2.1.so.7* "$lib"/libevent_pthreads-2.1.so.7* \
    "$lib"/libpmix.so* "$lib"/libmca_common_* "$lib"/libmunge.so.2* "$lib"/openmpi "$lib"/pmix2 \
    "$dir/root/usr/lib/x86_64-linux-gnu/"
cp -L "$lib/libudev.so.1" "$dir/root/usr/lib/x86_64-linux-gnu/"
cp -L /usr/bin/orterun /usr/bin/orted "$dir/root/usr/bin/"
ln -s orterun "$dir/root/usr/bin/mpirun"
cp -a /etc/openmpi "$dir/root/etc/"
cp -a /usr/share/openmpi "$dir/root/usr/share/"
sed "s|@DIR@|$dir|g" >"$dir/run.sh" <<'RUN'
#!/bin/bash
# On the GPU machine, from the checkout's root: the GPU checks with the packed binaries
# (tools/gpu_device_pack.sh lists the parts; PARTS="..." picks some).
set -u
exec > >(tee "$OUT/log.txt") 2>&1
cp -an @DIR@/root/. / 2>/dev/null
ldconfig
nccl=$(dirname "$(find /opt /usr -name 'libnccl.so.2' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$PWD/@DIR@/lib:$nccl
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
b=$PWD/@DIR@/bin
parts=" ${PARTS:-info kernels grad nccl adopt checkpoint model exec premul bench} "
want() {
    [[ $parts == *" $1 "* ]] || return 1
    echo "== $1 (at ${SECONDS}s)"
}
# NAME SECONDS RE CMD...: CMD under a timeout into $OUT/NAME.txt; its exit, the lines matching RE
part() {
    local name=$1 t=$2 re=$3
    shift 3
    timeout "$t" "$@" >"$OUT/$name.txt" 2>&1
    echo "$name: exit $?"
    grep -E "$re" "$OUT/$name.txt" | tail -14
}
if want info; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    ls "$nccl"/libnccl.so* 2>/dev/null | head -3
    echo "machine code and PTX in dtr:"
    cuobjdump --list-elf "$b/dtr" | grep -oE 'sm_[0-9a-z]+' | sort | uniq -c
    cuobjdump --list-ptx "$b/dtr" | grep -oE 'sm_[0-9a-z]+' | sort | uniq -c
fi
if want kernels; then
    part kernels 120 "check" "$b/cuda_bench"
    if [ -x "$b/cuda_bench_before" ]; then
        for k in 1 2; do
            timeout 60 "$b/cuda_bench_before" >"$OUT/kernels_before$k.txt" 2>&1
            timeout 120 "$b/cuda_bench" >"$OUT/kernels_after$k.txt" 2>&1
        done
        echo "kernels: before and after alternated twice (kernels_before2.txt, kernels_after2.txt)"
    fi
fi
if want grad; then
    for t in grad group; do
        DTR_TEST_SPACE=cuda part "${t}_cuda" 150 "FAIL|passed|skipped" mpirun -x DTR_TEST_SPACE \
            -x LD_LIBRARY_PATH --oversubscribe -n 8 "$b/${t}_mpi_test_bin"
    done
fi
if want nccl; then
    for k in nccl-id nccl-comm; do
        part "exec_$k" 150 "plans on|FAIL|skipped" mpirun -x LD_LIBRARY_PATH -n 1 \
            "$b/mpi_exec_test_bin" --memory cuda --backend "$k" --cases 200 --seed 20261128
    done
fi
if want adopt; then
    LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/@DIR@/lib2 part adopt 90 "Synthesis|FAIL|fail" \
        "$b/nccl_adopt_test" --verbose
fi
if want checkpoint; then
    DTR_TEST_SPACE=cuda LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/@DIR@/lib2 part checkpoint 90 \
        "Synthesis|FAIL|skipped" "$b/space_test" --verbose
fi
if want model; then
    part grad_model 240 "^gpu:|FAIL|passed" bash tests/tools/cli_grad_model.sh "$b/dtr"
fi
if want exec; then
    part gpu_test 240 "plans on|all runs|FAIL" \
        bash tests/redistribute/executor/mpi_exec_gpu_test.sh "$b/mpi_exec_test_bin"
fi
if want premul; then
    DTR_TEST_SPACE=nccl part premul_nccl 120 "FAIL|passed|skipped" mpirun -x DTR_TEST_SPACE \
        -x LD_LIBRARY_PATH -n 1 "$b/premul_mpi_test_bin"
    DTR_TEST_SPACE=cuda part premul_cuda 200 "FAIL|passed|skipped" mpirun -x DTR_TEST_SPACE \
        -x LD_LIBRARY_PATH --oversubscribe -n 8 "$b/premul_mpi_test_bin"
fi
if want bench; then
    DTR_BIN=$b/dtr CUDA_BENCH_BIN=$b/cuda_bench timeout 240 \
        bash bench/gpu_bench.sh "$OUT/gpu-bench.md"
    echo "bench: exit $?"
fi
if want cli; then
    part cli_run 240 "^gpu:|FAIL|passed" bash tests/tools/cli_run.sh "$b/dtr"
    part cli_grad 300 "^gpu:|FAIL|passed" bash tests/tools/cli_grad.sh "$b/dtr"
fi
echo "done at ${SECONDS}s"
RUN
echo "gpu_device_pack: $dir ($(du -sh "$dir" | cut -f1)); on the device: bash $dir/run.sh"
