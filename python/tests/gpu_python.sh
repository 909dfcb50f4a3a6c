#!/usr/bin/env bash
# Python on a GPU (the GPU pack's part "python", tools/gpu_pack_run.sh): the package built
# there with its CUDA space (pip install ./python: cc and nvcc; no MPI, Gloo or checkpoint
# module needed) into a folder of its own, then python/tests/torchrun_device.py on device
# "cuda": torch on nccl, one rank (the engine hands NCCL the GPU buffers), and torch on gloo,
# two ranks sharing the GPU (staged through host memory); then dtr's own NCCL backend
# (backend="nccl", one rank: NCCL takes a GPU a rank) on the forms within one mesh; blocks
# as torch CUDA tensors, dtr.DeviceArrays and CuPy arrays (__cuda_array_interface__). Needs
# python3 with torch (and CuPy for that kind), as the GPU machine has; DTR_NCCL_LIB names a
# libdtr_nccl.so where pip could not build one (the pack's, tools/gpu_device_pack.sh).
#
#   bash python/tests/gpu_python.sh [CASES]          (default 10 a form and kind)
#
# Ends with "gpu python: N passed, N failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cases=${1:-10}
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
passed=0 failed=0
py=${PYTHON:-python3}
if ! (cd "$site" && DTR_WITHOUT=mpi,gloo,checkpoint "$py" -m pip install -q --no-deps \
    --no-build-isolation --no-index --target "$site/pkg" "$root/python" >"$site/log" 2>&1); then
    tail -20 "$site/log"
    echo "gpu python: 0 passed, 1 failed"
    exit 1
fi
export PYTHONPATH=$site/pkg${PYTHONPATH:+:$PYTHONPATH}
ls "$site/pkg/dtr" | grep -q '^libdtr_cuda\.so\.' || { echo "gpu python: no libdtr_cuda.so (nvcc not found?)"; failed=1; }
# dtr's own NCCL backend needs MPI's headers to build, which the GPU machine lacks: the pack
# brings Bazel's libdtr_nccl.so ($DTR_NCCL_LIB), put beside the package's libraries
if [ -n "${DTR_NCCL_LIB:-}" ] && ! ls "$site/pkg/dtr" | grep -q '^libdtr_nccl\.so\.'; then
    cp "$DTR_NCCL_LIB" "$site/pkg/dtr/libdtr_nccl.so.$(sed -nE 's/^DTR_VERSION_MAJOR = ([0-9]+).*/\1/p' "$root/version.bzl")"
fi
runs=("nccl 1 torch" "gloo 2 torch")
ls "$site/pkg/dtr" | grep -q '^libdtr_nccl\.so\.' && runs+=("gloo 1 nccl") ||
    { echo "gpu python: no libdtr_nccl.so (DTR_NCCL_LIB unset, NCCL not found?)"; failed=$((failed + 1)); }
for run in "${runs[@]}"; do
    read -r pg n backend <<<"$run"
    echo "== torchrun --nproc-per-node $n python/tests/torchrun_device.py $cases --device cuda --pg $pg --backend $backend"
    (cd "$site" && timeout 300 "$py" -m torch.distributed.run --nproc-per-node "$n" \
        "$root/python/tests/torchrun_device.py" "$cases" --device cuda --pg "$pg" \
        --backend "$backend") >"$site/out" 2>&1
    rc=$?
    grep -E '^(torchrun device|  FAILED)' "$site/out" | head -20
    line=$(grep -oE '^torchrun device: [0-9]+ passed, [0-9]+ failed' "$site/out" | tail -1)
    p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"${line:-: 0 passed}")
    f=$(sed -E 's/.*, ([0-9]+) failed/\1/' <<<"${line:-, 1 failed}")
    [ -z "$line" ] && grep -E '^[A-Za-z.]*(Error|Exception)' "$site/out" | sort -u | head -4
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && { tail -20 "$site/out"; f=1; }
    passed=$((passed + p))
    failed=$((failed + f))
done
echo "gpu python: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
