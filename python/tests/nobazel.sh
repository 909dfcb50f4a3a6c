#!/usr/bin/env bash
# `pip install ./python` as a user without Bazel does it: into a new virtual environment, with
# no bazel on PATH (a PATH of links to /usr/bin without it), so the library is compiled by
# python/build_lib.py from dist/sources.txt. Twice:
#   1. the smallest build (DTR_WITHOUT=mpi,gloo,checkpoint,cuda,nccl: what a machine with only a
#      compiler and Python gets): planning works, the default backend is the torch engine,
#      backends 'mpi', 'gloo' and 'nccl' and dtr.load are refused by name, the package carries libdtr.so.0 alone,
#      and the torchrun example below runs on the torch engine;
#   2. the build with what this machine has (Open MPI, Gloo, Jansson and xxHash; tools/setup.sh;
#      CUDA where nvcc is, whose libdtr_cuda.so.0 the package then carries and finds):
#      two processes started with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT alone (no
#      mpirun, no torch) move a tensor over Gloo through dtr's own store, and, where a PyTorch
#      environment is found (DTR_TORCH_VENV, default ~/.cache/dtr/torch-venv: bench/pytorch/
#      venv.sh makes it), the torchrun example runs on 2 ranks with torch taken from there.
#
#   bash python/tests/nobazel.sh
# Ends with "nobazel: N passed, N failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
torch_venv=${DTR_TORCH_VENV:-$HOME/.cache/dtr/torch-venv}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }

mkdir "$tmp/bin"
for f in /usr/bin/*; do
    case ${f##*/} in bazel*) ;; *) ln -s "$f" "$tmp/bin/" ;; esac
done
path="$tmp/venv/bin:$tmp/bin"
[ -d /usr/local/cuda/bin ] && path="$path:/usr/local/cuda/bin"
if PATH=$path command -v bazel >/dev/null; then bad "bazel is still on PATH"; else ok "no bazel on PATH"; fi
python3 -m venv "$tmp/venv" || exit 1
py=$tmp/venv/bin/python

# torchrun_example LABEL: the example on 2 ranks under torchrun, torch taken from the PyTorch
# environment (after this environment's own packages, so dtr is the one just installed)
site=$(ls -d "$torch_venv"/lib/python3*/site-packages 2>/dev/null | head -1)
torchrun_example() {
    if [ -z "$site" ] || [ ! -x "$torch_venv/bin/python" ] ||
        [ "$("$torch_venv/bin/python" -c 'import sys; print(sys.version_info[:2])')" != \
          "$("$py" -c 'import sys; print(sys.version_info[:2])')" ]; then
        echo "skipped: $1: the torchrun example (no PyTorch environment at $torch_venv for this Python; bash bench/pytorch/venv.sh makes one)"
        return
    fi
    echo "$site" >"$(ls -d "$tmp"/venv/lib/python3*/site-packages)/torch_venv.pth"
    local where
    where=$(cd "$tmp" && "$py" -c 'import dtr; print(dtr.__file__)')
    if [ "${where#"$tmp"/venv/}" = "$where" ]; then
        bad "$1: dtr imported from $where, not the new environment"
    elif (cd "$tmp" && PATH=$path timeout 300 "$py" -m torch.distributed.run \
        --nproc-per-node 2 "$root/examples/python_tensor_parallel/dtensor_mlp.py" \
        >"$tmp/out" 2>&1); then
        ok "$1: torchrun --nproc-per-node 2 examples/python_tensor_parallel/dtensor_mlp.py: $(grep -m1 '^dtensor_mlp.py' "$tmp/out")"
    else
        bad "$1: torchrun example:"$'\n'"$(tail -15 "$tmp/out")"
    fi
    if (cd "$tmp" && PATH=$path timeout 300 "$py" -m torch.distributed.run \
        --nproc-per-node 2 "$root/examples/python_refit/refit.py" >"$tmp/out" 2>&1); then
        ok "$1: torchrun --nproc-per-node 2 examples/python_refit/refit.py: $(grep -m1 '^refit.py' "$tmp/out")"
    else
        bad "$1: the refit example:"$'\n'"$(tail -15 "$tmp/out")"
    fi
}

# install LABEL ENV...: pip install ./python with ENV; its "dtr setup: built" line
install() {
    local label=$1
    shift
    if (cd "$tmp" && env PATH="$path" "$@" "$py" -m pip install -v --force-reinstall \
        "$root/python" >"$tmp/log" 2>&1); then
        ok "$label: $(grep -m1 -o 'dtr setup: built.*' "$tmp/log")"
    else
        bad "$label: pip install failed:"$'\n'"$(grep -E 'dtr setup|error' "$tmp/log" | tail -15)"
        return 1
    fi
}

if install "the smallest build" DTR_WITHOUT=mpi,gloo,checkpoint,cuda,nccl; then
    if grep -q 'dtr setup: built libdtr.so.0 with core; without checkpoint: left out by DTR_WITHOUT; without mpi: left out by DTR_WITHOUT; without gloo: left out by DTR_WITHOUT; without cuda: left out by DTR_WITHOUT; without nccl: left out by DTR_WITHOUT$' "$tmp/log"; then
        ok "the smallest build: its parts"
    else
        bad "the smallest build: parts other than the core alone"
    fi
    if out=$(cd "$tmp" && PATH=$path "$py" - 2>&1 <<'EOF'
import os, dtr
pkg = os.path.dirname(dtr.__file__)
libs = sorted(f for f in os.listdir(pkg) if ".so" in f and not f.startswith("_core"))
assert libs == ["libdtr.so.0"], libs
assert dtr._core.mpi_library() is None
assert dtr.Mesh((2,)).backend == "torch", dtr.Mesh((2,)).backend
try:
    dtr.Mesh((2,), backend="mpi")
    raise AssertionError("backend='mpi' was not refused")
except dtr.BackendError as e:
    assert str(e).startswith("backend 'mpi': this dtr was built without MPI (when pip built "
                             "it: left out by DTR_WITHOUT)"), e
try:
    dtr.Mesh((2,), backend="gloo")
    raise AssertionError("backend='gloo' was not refused")
except dtr.ArgumentError as e:
    assert str(e) == ("backend 'gloo': this dtr was built without Gloo (when pip built it: "
                      "left out by DTR_WITHOUT)"), e
try:
    dtr.Mesh((2,), backend="nccl")
    raise AssertionError("backend='nccl' was not refused")
except dtr.ArgumentError as e:
    assert str(e) == ("backend 'nccl': this dtr was built without NCCL (when pip built it: "
                      "left out by DTR_WITHOUT)"), e
try:
    dtr.load("nowhere", dtr.Mesh((1,)), [])
    raise AssertionError("dtr.load was not refused")
except dtr.RefusedError as e:
    assert str(e) == ("dtr.load: this dtr was built without its checkpoint module (when pip "
                      "built it: left out by DTR_WITHOUT)"), e
try:
    dtr.Mesh((2,), device="cuda")
    raise AssertionError("device='cuda' was not refused")
except dtr.RefusedError as e:
    assert str(e).startswith("device 'cuda': this dtr has no memory space 'cuda' ("), e
    assert "libdtr_cuda.so.0" in str(e), e
p = dtr.plan(dtr.Mesh((2, 2)), (8, 6), "S(0),S(1)", "R,R")
assert [s["kind"] for s in p.steps] == ["all_gather", "all_gather"], p.steps
print("refused by name: backend mpi, gloo and nccl, device cuda, dtr.load; planned", len(p.steps), "steps")
EOF
    ); then ok "the smallest build: ${out##*$'\n'}"; else bad "the smallest build:"$'\n'"$out"; fi
    torchrun_example "the smallest build (the torch engine)"
fi

if install "the build with what this machine has"; then
    # a rank over dtr's own TCP store, as a job torchrun starts without torch
    cat >"$tmp/move.py" <<'EOF'
import numpy as np, dtr
mesh = dtr.Mesh((2,), backend="gloo")
full = np.arange(12 * 5, dtype=np.float32).reshape(12, 5)
def block(placements):
    me = dtr.layout(mesh, full.shape, placements)[mesh.rank]
    return full[tuple(slice(o, o + n) for o, n in zip(me.global_offset, me.local_shape))]
out = dtr.redistribute(block("S(0)").copy(), mesh, "S(0)", "S(1)", shape=full.shape)
assert np.array_equal(out, block("S(1)")), (mesh.rank, out)
print(f"rank {mesh.rank}: S(0) -> S(1) over gloo, {out.shape} exact")
EOF
    port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    for r in 0 1; do
        (cd "$tmp" && PATH=$path RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            timeout 120 "$py" move.py >"$tmp/rank$r" 2>&1; echo $? >"$tmp/rc$r") &
    done
    wait
    if [ "$(cat "$tmp/rc0")$(cat "$tmp/rc1")" = 00 ]; then
        ok "2 processes over gloo, no mpirun: $(cat "$tmp/rank0")"
    else
        bad "2 processes over gloo:"$'\n'"$(tail -5 "$tmp/rank0" "$tmp/rank1")"
    fi
    # the CUDA space where nvcc is found: carried beside libdtr.so, found by name, and a
    # machine without a GPU is told so (on one with a GPU the mesh is made)
    if PATH=$path command -v nvcc >/dev/null; then
        if out=$(cd "$tmp" && PATH=$path "$py" - 2>&1 <<'EOF'
import os, dtr
pkg = os.path.dirname(dtr.__file__)
assert "libdtr_cuda.so.0" in os.listdir(pkg), os.listdir(pkg)
try:
    print("device cuda:", dtr.Mesh((1,), device="cuda").device)
except dtr.RefusedError as e:
    assert str(e).startswith("device 'cuda': no device of it is visible ("), e
    print("device cuda: libdtr_cuda.so.0 loaded;", str(e)[:60])
if "libdtr_nccl.so.0" in os.listdir(pkg):  # (where pip found NCCL too)
    try:
        print("backend nccl:", dtr.Mesh((1,), backend="nccl").device)
    except dtr.RefusedError as e:
        assert str(e).startswith("device 'cuda': no device of it is visible ("), e
        print("backend nccl: libdtr_nccl.so.0 carried, a mesh on it says no GPU")
EOF
        ); then ok "the CUDA space: ${out##*$'\n'}"; else bad "the CUDA space:"$'\n'"$out"; fi
    else
        echo "skipped: the CUDA space (no nvcc on PATH or in /usr/local/cuda/bin)"
    fi
    torchrun_example "the build with what this machine has"
fi
echo "nobazel: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
