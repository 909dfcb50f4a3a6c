#!/usr/bin/env bash
# Packs what the GPU checks need onto a lent GPU machine that has CUDA, NCCL (PyTorch's
# wheel) and Python but no Bazel, Criterion or Debian's Open MPI (issue 25's recipe).
#
#   bash tools/gpu_device_pack.sh [DIR]      (default .dev; add it to .git/info/exclude)
#
# builds (-c opt, with CUDA) dtr, cuda_bench, the executor's random-case binary and the
# pre-multiplied gradient reduction's test, copies them to DIR/bin, Open MPI's and PMIx's
# files as Debian lays them out to DIR/root (to be copied over / there without replacing
# anything), and writes DIR/run.sh, which on the GPU machine runs NCCL's pre-multiplied sums
# and the gradient reduction on CUDA memory (premul), the executor's GPU random cases
# (exec), cli_run.sh's and cli_grad.sh's checks, GPU ones included (cli), and
# bench/gpu_bench.sh (bench),
# leaving logs and docs/gpu-bench.md's text in $OUT; PARTS="premul exec" picks some (all by
# default). Then, with the device tool: run `bash DIR/run.sh` carrying DIR (about 30 MiB).
set -eu
cd "$(dirname "$0")/.."
dir=${1:-.dev}
case "$dir" in
/* | ../* | *..*)
    echo "gpu_device_pack: DIR '$dir': a path inside the checkout (it travels with it)" >&2
    exit 2
    ;;
esac
bazel build -c opt //tools:dtr //bench:cuda_bench //tests/redistribute/executor:mpi_exec_test_bin \
    //tests/autograd:premul_mpi_test_bin >/dev/null
ldd bazel-bin/tools/dtr | grep -q libcudart || {
    echo "gpu_device_pack: bazel-bin/tools/dtr was built without CUDA (nvcc not found?)" >&2
    exit 1
}
# only what this script writes: anything else kept in DIR (notes, logs) stays
rm -rf "$dir/bin" "$dir/lib" "$dir/root" "$dir/run.sh"
mkdir -p "$dir/bin" "$dir/lib" "$dir/root/usr/lib/x86_64-linux-gnu" "$dir/root/usr/bin" \
    "$dir/root/etc" "$dir/root/usr/share"
cp -L bazel-bin/tools/dtr bazel-bin/bench/cuda_bench \
    bazel-bin/tests/redistribute/executor/mpi_exec_test_bin \
    bazel-bin/tests/autograd/premul_mpi_test_bin "$dir/bin/"
cp -L /usr/local/cuda/lib64/libcudart.so.13 "$dir/lib/"
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
cat >"$dir/run.sh" <<EOF
#!/bin/bash
# On the GPU machine, from the checkout's root: the GPU checks with the packed binaries.
set -u
exec > >(tee "\$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
cp -an $dir/root/. / 2>/dev/null; ldconfig
nccl=\$(dirname "\$(find /opt /usr -name 'libnccl.so.2' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=\$PWD/$dir/lib:\$nccl
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
parts=" \${PARTS:-premul exec cli bench} "
if [[ \$parts == *" premul "* ]]; then
echo "== premul_mpi_test: NCCL on 1 rank, then CUDA memory on 8 ranks (shared GPU)"
DTR_TEST_SPACE=nccl timeout 120 mpirun -x DTR_TEST_SPACE -n 1 $dir/bin/premul_mpi_test_bin \
    >"\$OUT/premul_nccl.txt" 2>&1; echo "exit \$?"
grep -E "FAIL|passed|skipped" "\$OUT/premul_nccl.txt" | tail -8
DTR_TEST_SPACE=cuda timeout 200 mpirun -x DTR_TEST_SPACE --oversubscribe -n 8 \
    $dir/bin/premul_mpi_test_bin >"\$OUT/premul_cuda.txt" 2>&1; echo "exit \$?"
grep -E "FAIL|passed|skipped" "\$OUT/premul_cuda.txt" | tail -8
fi
if [[ \$parts == *" exec "* ]]; then
echo "== mpi_exec_gpu_test"
timeout 200 bash tests/redistribute/executor/mpi_exec_gpu_test.sh $dir/bin/mpi_exec_test_bin \\
    >"\$OUT/gpu_test.txt" 2>&1; echo "exit \$?"
grep -E "plans on|all runs|FAIL" "\$OUT/gpu_test.txt" | tail -12
fi
if [[ \$parts == *" cli "* ]]; then
echo "== cli_run.sh"
timeout 240 bash tests/tools/cli_run.sh \$PWD/$dir/bin/dtr >"\$OUT/cli_run.txt" 2>&1; echo "exit \$?"
grep -E "^gpu:|FAIL|passed" "\$OUT/cli_run.txt" | tail -15
echo "== cli_grad.sh"
timeout 300 bash tests/tools/cli_grad.sh \$PWD/$dir/bin/dtr >"\$OUT/cli_grad.txt" 2>&1; echo "exit \$?"
grep -E "^gpu:|FAIL|passed" "\$OUT/cli_grad.txt" | tail -15
fi
[[ \$parts == *" bench "* ]] || exit 0
echo "== gpu_bench"
DTR_BIN=\$PWD/$dir/bin/dtr CUDA_BENCH_BIN=\$PWD/$dir/bin/cuda_bench timeout 240 \\
    bash bench/gpu_bench.sh "\$OUT/gpu-bench.md"; echo "exit \$?"
EOF
echo "gpu_device_pack: $dir ($(du -sh "$dir" | cut -f1)); on the device: bash $dir/run.sh"
