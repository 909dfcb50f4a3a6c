#!/usr/bin/env bash
# The Python package's tests, on the package as a user gets it: `pip install ./python` into a
# virtual environment (which compiles libdtr from dist/sources.txt and carries it), `pip wheel`
# checked for the library it must carry, then pytest on 1 process and under mpirun, then the
# parity cases and backend checks over Gloo under tools/dtr_launch.sh (no MPI), meeting
# through its file store and through dtr's own TCP store (MASTER_ADDR, MASTER_PORT); and
# python/tests/nobazel.sh: the install without Bazel, in a new environment.
#
#   bash python/tests/run.sh [--torch]
#
#   --torch   run in the PyTorch environment instead (bench/pytorch/venv.sh: about 5 GiB from
#             PyPI on first use), where the torch tests run too: torch tensors, and the
#             differential test against torch.distributed.tensor over gloo, the DDP hook
#             against PyTorch's own, and examples/python_tensor_parallel on 1, 2 and 4 ranks;
#             then under torchrun (no mpirun): torchrun_dtensor.py, dtr.torch.redistribute and
#             patch() against DTensor on 2 and 4 ranks, on dtr's Gloo and on the torch
#             engine (Mesh(..., backend="torch")), the example's dtensor_mlp.py, and
#             examples/python_refit/refit.py on 2 and 4 ranks; torchrun_device.py, the
#             parity cases on the torch engine with every block on the fake device
# Env: DTR_PY_VENV   the environment (default ~/.cache/dtr/py-venv; created with numpy,
#                    mpi4py and pytest from PyPI on first use)
#      DTR_PY_RANKS  the job sizes (default "1 2 4")
#      DTR_PY_GLOO_RANKS  the job sizes over Gloo (default "2 4")
#      DTR_PY_TORCHRUN_CASES  the cases of torchrun_dtensor.py per job size on dtr's Gloo
#                    (--torch; default 500, on 2 and 4 ranks)
#      DTR_PY_ENGINE_CASES  the same on the torch engine (default 200)
#      DTR_PY_DEVICE_CASES  torchrun_device.py's cases per form (--torch; default 20)
#      DTR_PY_SEED   the seed of the random tests (printed by each run)
# Ends with "python: N passed, N failed" (pytest's test counts of rank 0, summed over the runs,
# and the checks of the wheel).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${DTR_PY_VENV:-$HOME/.cache/dtr/py-venv}
if [ "${1:-}" = --torch ]; then
    py=$(bash "$root/bench/pytorch/venv.sh") || exit 1
    venv=$(dirname "$(dirname "$py")")
elif [ -n "${1:-}" ]; then
    echo "run.sh: unknown argument '$1' (see the comment at the top)" >&2
    exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x "$venv/bin/python" ] || python3 -m venv "$venv" || exit 1
"$venv/bin/python" -c 'import numpy, mpi4py, pytest, ml_dtypes, safetensors' 2>/dev/null ||
    "$venv/bin/pip" install -q numpy mpi4py pytest ml-dtypes safetensors || exit 1
passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== python: pip install $root/python"
if ! "$venv/bin/pip" install -q --force-reinstall --no-deps "$root/python" >"$tmp/log" 2>&1; then
    cat "$tmp/log"
    echo "python: 0 passed, 1 failed"
    exit 1
fi
echo "== python: pip wheel $root/python"
if "$venv/bin/pip" wheel -q --no-deps "$root/python" -w "$tmp/wheel" >"$tmp/log" 2>&1; then
    files=$(python3 -m zipfile -l "$tmp"/wheel/dtr-*.whl)
    want=('dtr/libdtr\.so\.[0-9]+ ' 'dtr/libdtr_gloo\.so\.[0-9]+ ' 'dtr/_core\.[a-z0-9_-]+\.so ' 'dtr/__init__\.py '
        'dtr/libjansson\.so\.4 ' 'dtr/libxxhash\.so\.0 ' 'dtr/libgloo\.so\.0 ' 'dtr/carried\.txt ')
    # (CUDA's space where pip found nvcc, as build_lib.py looks for it)
    if command -v nvcc >/dev/null || [ -x "${CUDA_HOME:-/nonexistent}/bin/nvcc" ] || [ -x /usr/local/cuda/bin/nvcc ]; then
        want+=('dtr/libdtr_cuda\.so\.[0-9]+ ')
    fi
    for f in "${want[@]}"; do
        if grep -qE "^$f" <<<"$files"; then
            passed=$((passed + 1))
        else
            echo "python: the wheel lacks $f"
            failed=$((failed + 1))
        fi
    done
    if grep -qE '^dtr/[^ ]+\.[ch] ' <<<"$files"; then
        echo "python: the wheel carries the extension's C sources"
        failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
else
    cat "$tmp/log"
    failed=$((failed + 1))
fi

# without Bazel: a new environment, no bazel on PATH, the smallest build and the full one
if [ "${1:-}" != --torch ]; then
    echo "== python: python/tests/nobazel.sh (pip install ./python without Bazel, into a new environment)"
    out=$(bash "$root/python/tests/nobazel.sh" 2>&1)
    rc=$?
    echo "$out" | tail -12
    # (a failed check's lines, wherever it is: the tail above may not reach them)
    grep -A12 '^FAILED' <<<"$out" | head -60
    p=$(grep -oE '^nobazel: [0-9]+ passed' <<<"$out" | grep -oE '[0-9]+')
    f=$(grep -oE '^nobazel: [0-9]+ passed, [0-9]+ failed' <<<"$out" | grep -oE '[0-9]+ failed' | cut -d' ' -f1)
    p=${p:-0} f=${f:-0}
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    passed=$((passed + p))
    failed=$((failed + f))
fi

# the installed package loads the Jansson and xxHash it carries, not the machine's
echo "== python: the carried libraries are the ones loaded"
if (cd "$tmp" && "$venv/bin/python" -c '
import os, dtr
pkg = os.path.dirname(dtr.__file__)
maps = open("/proc/self/maps").read()
for lib in ("libjansson.so.4", "libxxhash.so.0") + (("libgloo.so.0",) if os.path.exists(
        os.path.join(pkg, "carried.txt")) else ()):
    paths = {l.split()[-1] for l in maps.splitlines() if l.endswith(lib)}
    assert paths == {os.path.join(pkg, lib)}, (lib, paths)
print("loaded from", pkg)'); then
    passed=$((passed + 1))
else
    echo "python: the package does not load its own libjansson/libxxhash/libgloo"
    failed=$((failed + 1))
fi

# backend gloo where the machine has no Gloo: every system copy of what the package carries
# for libdtr_gloo.so (carried.txt: libgloo.so.0 and what it loads) hidden in a mount namespace
# of this job alone (unshare -m, a bind of /dev/null over each), two processes move a tensor
pkg=$(cd "$tmp" && "$venv/bin/python" -c 'import os, dtr; print(os.path.dirname(dtr.__file__))')
if [ -f "$pkg/carried.txt" ]; then
    echo "== python: backend gloo with the machine's Gloo hidden: $(tr '\n' ' ' <"$pkg/carried.txt")"
    hide=$(for name in $(cat "$pkg/carried.txt"); do
        for d in /usr/lib /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/local/lib; do
            [ -e "$d/$name" ] && readlink -f "$d/$name"
        done
    done | sort -u | tr '\n' ' ')
    cat >"$tmp/gloo_hidden.py" <<'PYEOF2'
import numpy as np, dtr
mesh = dtr.Mesh((2,), backend="gloo")
full = np.arange(12 * 5, dtype=np.float32).reshape(12, 5)
me = dtr.layout(mesh, full.shape, "S(0)")[mesh.rank]
block = full[me.global_offset[0]:me.global_offset[0] + me.local_shape[0]].copy()
assert np.array_equal(dtr.redistribute(block, mesh, "S(0)", "R", shape=full.shape), full)
print(f"rank {mesh.rank}: S(0) -> R over gloo, exact")
PYEOF2
    if ! unshare -m true 2>/dev/null; then
        echo "skipped: unshare -m is not allowed here"
    elif out=$(cd "$tmp" && unshare -m bash -c 'for f in $1; do mount --bind /dev/null "$f" || exit 3; done
        if "$4" -c "import ctypes; ctypes.CDLL(\"libgloo.so.0\")" 2>/dev/null; then
            echo "the machine'"'"'s libgloo.so.0 still loads"; exit 4
        fi
        timeout 120 bash "$3/tools/dtr_launch.sh" -n 2 "$4" gloo_hidden.py' _ "$hide" "$pkg" "$root" \
        "$venv/bin/python" 2>&1) && [ "$(grep -o 'over gloo, exact' <<<"$out" | wc -l)" = 2 ]; then
        echo "ok: hidden: $hide; both ranks: S(0) -> R over gloo, exact"
        passed=$((passed + 1))
    else
        echo "python: backend gloo with the machine's Gloo hidden:"$'\n'"$out" | tail -8
        failed=$((failed + 1))
    fi
fi

# the CLI the checkpoint tests run beside the package: DTR_CLI, else Bazel's build of it
if [ -z "${DTR_CLI:-}" ] && command -v bazel >/dev/null &&
    (cd "$root" && bazel build --noshow_progress //cli:dtr >/dev/null 2>&1); then
    export DTR_CLI=$(cd "$root" && bazel info bazel-bin 2>/dev/null)/cli/dtr
fi
cd "$tmp" # (not the checkout: `import dtr` must find the installed package)
# tally RC: adds pytest's counts in $tmp/out (rank 0's) to the totals; a run that failed
# without a failed test (a crash, a timeout) counts as one failure.
tally() {
    local rc=$1 p f
    tail -3 "$tmp/out"
    p=$(grep -oE '[0-9]+ passed' "$tmp/out" | tail -1 | cut -d' ' -f1)
    f=$(grep -oE '[0-9]+ failed' "$tmp/out" | tail -1 | cut -d' ' -f1)
    p=${p:-0} f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        tail -30 "$tmp/out"
        f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
}
# tally_line NAME RC: adds the counts of $tmp/out's last "NAME: N passed, N failed" line (a
# torchrun script's, printed by its rank 0) after showing its lines and failures; a run
# without that line, or that failed without a failure counted, counts as one failure.
tally_line() {
    local name=$1 rc=$2 line p f
    grep -E "^($name|  FAILED)" "$tmp/out"
    line=$(grep -oE "^$name: [0-9]+ passed, [0-9]+ failed" "$tmp/out" | tail -1)
    p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"${line:-: 0 passed}")
    f=$(sed -E 's/.*, ([0-9]+) failed/\1/' <<<"${line:-, 1 failed}")
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && { tail -30 "$tmp/out"; f=1; }
    passed=$((passed + p))
    failed=$((failed + f))
}
for n in ${DTR_PY_RANKS:-1 2 4}; do
    echo "== python: $n rank(s): pytest $root/python/tests"
    if [ "$n" -eq 1 ]; then
        "$venv/bin/python" -m pytest -q "$root/python/tests" >"$tmp/out" 2>&1
    else
        timeout 600 mpirun --oversubscribe -n "$n" bash -c \
            'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exec "$0" -m pytest -q "$1"; else exec "$0" -m pytest -q "$1" >/dev/null; fi' \
            "$venv/bin/python" "$root/python/tests" >"$tmp/out" 2>&1
    fi
    tally $?
done
# no MPI: the parity cases, the backend checks and the collective save over Gloo, the processes started by
# tools/dtr_launch.sh (RANK, WORLD_SIZE, DTR_GLOO_STORE), as torchrun would
for n in ${DTR_PY_GLOO_RANKS:-2 4}; do
    echo "== python: $n processes, backend gloo (tools/dtr_launch.sh): test_parity.py test_backends.py test_save.py test_digest.py test_device.py"
    DTR_PY_BACKEND=gloo timeout 600 bash "$root/tools/dtr_launch.sh" -n "$n" bash -c \
        'set -- "$1/test_parity.py" "$1/test_backends.py" "$1/test_save.py" "$1/test_digest.py" "$1/test_device.py"; if [ "$RANK" = 0 ]; then exec "$0" -m pytest -q "$@"; else exec "$0" -m pytest -q "$@" >/dev/null; fi' \
        "$venv/bin/python" "$root/python/tests" >"$tmp/out" 2>&1
    tally $?
done
# no MPI and no shared directory: the ranks meet through dtr's own TCP store at MASTER_ADDR:
# MASTER_PORT (dtr/_store.py), rank 0 serving it, as a job torchrun starts without torch
echo "== python: 3 processes, backend gloo through dtr's own store (MASTER_ADDR, MASTER_PORT): test_parity.py test_save.py"
port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
DTR_PY_BACKEND=gloo MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 600 bash "$root/tools/dtr_launch.sh" -n 3 env -u DTR_GLOO_STORE bash -c \
    'set -- "$1/test_parity.py" "$1/test_save.py"; if [ "$RANK" = 0 ]; then exec "$0" -m pytest -q "$@"; else exec "$0" -m pytest -q "$@" >/dev/null; fi' \
    "$venv/bin/python" "$root/python/tests" >"$tmp/out" 2>&1
tally $?
echo "== python: 4 processes, backend gloo: python/tests/exit_inflight.py (a rank exits with a request in flight)"
if timeout 120 bash "$root/tools/dtr_launch.sh" -n 4 "$venv/bin/python" \
    "$root/python/tests/exit_inflight.py" >"$tmp/out" 2>&1; then
    passed=$((passed + 1))
else
    tail -10 "$tmp/out"
    failed=$((failed + 1))
fi
if "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    # torchrun, no mpirun: DTensor in and out against DTensor itself, and the example
    # on dtr's Gloo (through torch's store), then on the torch engine (torch's collectives)
    for run in "gloo 2 ${DTR_PY_TORCHRUN_CASES:-500}" "gloo 4 ${DTR_PY_TORCHRUN_CASES:-500}" \
        "torch 2 ${DTR_PY_ENGINE_CASES:-200}" "torch 4 ${DTR_PY_ENGINE_CASES:-200}"; do
        read -r backend n cases <<<"$run"
        echo "== python: DTR_TORCH_BACKEND=$backend torchrun --nproc-per-node $n python/tests/torchrun_dtensor.py $cases"
        DTR_TORCH_BACKEND=$backend timeout 900 "$venv/bin/torchrun" --nproc-per-node "$n" \
            "$root/python/tests/torchrun_dtensor.py" "$cases" >"$tmp/out" 2>&1
        tally_line "torchrun dtensor" $?
    done
    # the torch engine on device memory: the parity cases with every block on the fake
    # device (python/tests/fake_space.c), staged through host memory for torch's gloo
    for n in 2 4; do
        echo "== python: torchrun --nproc-per-node $n python/tests/torchrun_device.py ${DTR_PY_DEVICE_CASES:-20}"
        timeout 600 "$venv/bin/torchrun" --nproc-per-node "$n" "$root/python/tests/torchrun_device.py" \
            "${DTR_PY_DEVICE_CASES:-20}" >"$tmp/out" 2>&1
        tally_line "torchrun device" $?
    done
    # the torch engine's exit, 6 times (it aborted in about 1 run in 3 before the fix)
    for mode in mm mm_then_ok ok mm ok_destroy mm; do
        echo "== python: DTR_TORCH_BACKEND=torch torchrun --nproc-per-node 3 python/tests/engine_exit.py $mode"
        # (every rank's exit status 0, which torchrun's is; the ranks' "R end" lines may
        # interleave with each other and with torch's warnings, so they are not counted)
        if DTR_TORCH_BACKEND=torch timeout 300 "$venv/bin/torchrun" --nproc-per-node 3 \
            "$root/python/tests/engine_exit.py" "$mode" >"$tmp/out" 2>&1 &&
            ! grep -q 'terminate called' "$tmp/out"; then
            passed=$((passed + 1))
        else
            grep -E 'terminate|Error|end$' "$tmp/out" | head -10
            failed=$((failed + 1))
        fi
    done
    # the torchrun examples, each on its job sizes (EXAMPLE:SIZES)
    for job in python_tensor_parallel/dtensor_mlp.py:1,2,4 python_refit/refit.py:2,4; do
        ex=${job%%:*} sizes=${job#*:}
        for n in ${sizes//,/ }; do
            echo "== python: torchrun --nproc-per-node $n examples/$ex"
            if timeout 300 "$venv/bin/torchrun" --nproc-per-node "$n" "$root/examples/$ex" \
                >"$tmp/out" 2>&1; then
                grep -E "^${ex##*/}" "$tmp/out"
                passed=$((passed + 1))
            else
                tail -20 "$tmp/out"
                failed=$((failed + 1))
            fi
        done
    done
    for m in 1x1 1x2 2x2; do
        n=$(( ${m%x*} * ${m#*x} ))
        echo "== python: examples/python_tensor_parallel/mlp.py $m on $n rank(s)"
        if timeout 300 mpirun --oversubscribe -n "$n" "$venv/bin/python" \
            "$root/examples/python_tensor_parallel/mlp.py" "$m" >"$tmp/out" 2>&1; then
            tail -2 "$tmp/out"
            passed=$((passed + 1))
        else
            tail -20 "$tmp/out"
            failed=$((failed + 1))
        fi
    done
fi
echo "python: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
