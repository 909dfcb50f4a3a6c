#!/usr/bin/env bash
# Packs what the GPU checks need onto a lent GPU machine that has CUDA, NCCL (PyTorch's
# wheel) and Python but no Bazel, Criterion or Debian's Open MPI (issue 25's recipe), and
# perhaps nothing more than a distribution's essential tools (tests/tools/gpu_pack_test.sh
# runs the pack in such a bare root).
#
#   bash tools/gpu_device_pack.sh [DIR]      (default .dev; add it to .git/info/exclude)
#
# builds (-c opt, with CUDA) dtr, cuda_bench, the executor's random-case binary, the gradient
# reduction's tests (grad, group, premul), nccl_adopt_test and space_test, copies them to
# DIR/bin, the CUDA runtime and the checkpoint module's libraries to DIR/lib, and to DIR/root
# (copied over / there without replacing anything) Open MPI's and PMIx's files as Debian lays
# them out and every other library the binaries load beyond the C library's own (Criterion's
# and libgit2's among them); then tools/gpu_pack_run.sh as DIR/run.sh, which on the GPU
# machine runs, part by part (PARTS="..." picks some; the default all but cli and python), under one
# deadline (DTR_PACK_DEADLINE_S, default 520 s: parts that would pass it are skipped, and
# said to be):
#   info     the device, its driver, NCCL's version, the architectures the binaries carry
#   kernels  cuda_bench: divide, cast and add checked bit for bit against the host, then the
#            kernels' table
#   grad     grad_mpi_test and param_group_mpi_test with DTR_TEST_SPACE=cuda on 8 ranks
#   nccl     the random cases on NCCL contexts made without MPI: --backend nccl-id, nccl-comm
#            (DTR_PACK_CASES each, default 60)
#   adopt    nccl_adopt_test (a one-rank world each way, a plan on device memory)
#   model    cli_grad_model.sh's GPU checks: dtr grad --model on CUDA memory and NCCL
#   exec     mpi_exec_gpu_test.sh: the random cases on NCCL (1 rank) and shared GPU (2, 4)
#   premul   NCCL's pre-multiplied sums (1 rank), the reduction on CUDA memory (8 ranks)
#   checkpoint  space_test with DTR_TEST_SPACE=cuda: checkpoint blocks read into device
#            memory through host staging (dtr_checkpoint_read_block_to), every byte checked
#   bench    bench/gpu_bench.sh (docs/gpu-bench.md's tables)
#   cli      cli_run.sh's and cli_grad.sh's checks, GPU ones included
#   python   python/tests/gpu_python.sh: the package built there with its CUDA space, the
#            parity cases on device "cuda" under torchrun (torch on nccl, 1 rank; on gloo, 2;
#            dtr's backend "nccl", 1 rank, with Bazel's libdtr_nccl.so from DIR/lib2)
# The run prints a line "NAME: exit N" for each part, leaves log.txt, parts.tar (the parts'
# logs) and gpu-bench.md in $OUT (at most 8 files come back). With the device tool: run
# `bash DIR/run.sh` carrying DIR.
set -eu
cd "$(dirname "$0")/.."
dir=${1:-.dev}
case "$dir" in
/* | ../* | *..*)
    echo "gpu_device_pack: DIR '$dir': a path inside the checkout (it travels with it)" >&2
    exit 2
    ;;
esac
bins=(//cli:dtr //bench:cuda_bench //tests/redistribute/executor:mpi_exec_test_bin
    //tests/grad:premul_mpi_test_bin //tests/grad:grad_mpi_test_bin
    //tests/grad:param_group_mpi_test_bin //tests/backends/cuda:nccl_adopt_test
    //tests/checkpoint:space_test)
bazel build -c opt "${bins[@]}" //dist:libdtr_nccl.so >/dev/null
ldd bazel-bin/cli/dtr | grep -q libcudart || {
    echo "gpu_device_pack: bazel-bin/cli/dtr was built without CUDA (nvcc not found?)" >&2
    exit 1
}
rm -rf "$dir/bin" "$dir/lib" "$dir/lib2" "$dir/root" "$dir/run.sh"
lib=/usr/lib/x86_64-linux-gnu
mkdir -p "$dir/bin" "$dir/lib" "$dir/lib2" "$dir/root$lib" "$dir/root/usr/bin" "$dir/root/etc" \
    "$dir/root/usr/share"
for t in "${bins[@]}"; do
    p=${t#//}
    cp -L "bazel-bin/${p%%:*}/${p##*:}" "$dir/bin/"
done
cp -L /usr/local/cuda/lib64/libcudart.so.13 "$dir/lib/"
# the NCCL backend for the python part (pip there cannot build it: no MPI headers)
cp -L bazel-bin/dist/libdtr_nccl.so "$dir/lib2/"
# the checkpoint module's (libjansson4 and libxxhash0 may be missing on the GPU machine)
cp -L "$lib/libjansson.so.4" "$lib/libxxhash.so.0" "$dir/lib/"
# Every other library the binaries load, but the C library's own (any machine has them), the
# CUDA runtime above and NCCL (the machine's): into root, which adds what the machine lacks.
for f in "$dir"/bin/*; do ldd "$f"; done | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64)\.so|/libcudart\.|/libnccl\.|/libjansson\.|/libxxhash\.' |
    xargs -r -I{} cp -L {} "$dir/root$lib/"
cp -a "$lib"/libmpi.so.40* "$lib"/libopen-rte.so.40* "$lib"/libopen-pal.so.40* \
    "$lib"/libpmix.so* "$lib"/libmca_common_* "$lib"/libmunge.so.2* "$lib"/openmpi "$lib"/pmix2 \
    "$dir/root$lib/"
# what runs: no headers or static archives (they would crowd the 64 MiB the device tool carries)
rm -rf "$dir/root$lib/openmpi/include" "$dir/root$lib/pmix2/include"
find "$dir/root" \( -name '*.a' -o -name '*.la' \) -delete
cp -L /usr/bin/orterun /usr/bin/orted "$dir/root/usr/bin/"
ln -s orterun "$dir/root/usr/bin/mpirun"
cp -a /etc/openmpi "$dir/root/etc/"
cp -a /usr/share/openmpi "$dir/root/usr/share/"
cp tools/gpu_pack_run.sh "$dir/run.sh"
echo "gpu_device_pack: $dir ($(du -sh "$dir" | cut -f1)); on the device: bash $dir/run.sh"
