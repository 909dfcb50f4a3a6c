#!/usr/bin/env bash
# The executor's random cases on device buffers: NCCL on one rank, then the shared-GPU mode
# (MPI staged through host memory) on 2 and 4 ranks. Skips, with the reason, without a GPU.
# Usage: mpi_exec_gpu_test.sh BINARY
set -u
bin=$1
# tests/support/mpi_cases.sh: beside this script's folder under Bazel and in a checkout
dir=$(dirname "$0")/../../support
[ -f "$dir/mpi_cases.sh" ] || dir=tests/support
if DTR_EXEC_SPECS="1:300" bash "$dir/mpi_cases.sh" "$bin" --memory cuda --backend nccl &&
    DTR_EXEC_SPECS="2:200 4:150" bash "$dir/mpi_cases.sh" "$bin" --memory cuda; then
    exit 0
fi
exit 1
