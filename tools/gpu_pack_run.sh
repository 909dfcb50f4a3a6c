#!/bin/bash
# The GPU checks on a lent GPU machine, with the binaries tools/gpu_device_pack.sh packed into
# DIR (it copies this script to DIR/run.sh). From the checkout's root:
#
#   bash DIR/run.sh            every part but cli and python; PARTS="..." picks some
#
# Env: OUT            the folder whose files come back (the device tool sets it)
#      DTR_PACK_DEADLINE_S  seconds the whole run may take (default 520): a part gets at
#                     most what is left less a margin, and a part with under 20 s left is
#                     skipped and said to be
#      DTR_PACK_CASES the NCCL parts' random cases per backend (default 60)
# $OUT holds at most 8 files: log.txt (what is printed here), parts.tar (each part's log,
# added as the part ends), the running part's log while it runs, and gpu-bench.md. Without a
# GPU every part still starts its binaries, which skip with the reason, and the summary line
# of each part says "no GPU".
set -u
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-$dir/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
deadline=${DTR_PACK_DEADLINE_S:-520}
cases=${DTR_PACK_CASES:-60}
cp -an "$dir/root/." / 2>/dev/null
ldconfig 2>/dev/null
nccl_lib=$(find /opt /usr -name 'libnccl.so.2' 2>/dev/null | head -1)
nccl=${nccl_lib%/*}
export LD_LIBRARY_PATH=$dir/lib${nccl:+:$nccl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# one node: no ssh or rsh to look for; no noise for components the machine cannot load
export OMPI_MCA_plm_rsh_agent=false OMPI_MCA_mca_base_component_show_load_errors=0
ulimit -n "$(ulimit -Hn)" 2>/dev/null # NCCL opens many handles per communicator
b=$dir/bin
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
nogpu=""
[ "$gpus" -gt 0 ] || nogpu=" (no GPU)"
parts=" ${PARTS:-info kernels grad nccl adopt checkpoint model exec premul bench} "
skipped=""

# The time a part may take: its own limit, or what is left of the run less a 15 s margin.
budget() {
    local left=$((deadline - SECONDS - 15))
    [ "$1" -lt "$left" ] && left=$1
    echo "$left"
}

# want NAME: whether the part runs (picked, and 20 s or more left of the run)
want() {
    [[ $parts == *" $1 "* ]] || return 1
    if [ "$(budget 9999)" -lt 20 ]; then
        echo "== $1: skipped (at ${SECONDS}s, the run's deadline of ${deadline}s is near)"
        skipped="$skipped $1"
        return 1
    fi
    echo "== $1 (at ${SECONDS}s)"
}

# keep NAME: the part's log into $OUT/parts.tar (so $OUT holds few files), then gone
keep() {
    tar -rf "$OUT/parts.tar" -C "$OUT" "$1.txt" 2>/dev/null && rm -f "$OUT/$1.txt"
}

# part NAME SECONDS RE CMD...: CMD under a timeout into $OUT/NAME.txt; its exit, the lines
# matching RE, and the last lines where RE matches none (a start-up error shows either way)
part() {
    local name=$1 t re=$3
    t=$(budget "$2")
    shift 3
    timeout "$t" "$@" >"$OUT/$name.txt" 2>&1
    local rc=$?
    [ $rc -eq 124 ] && echo "$name: timed out after ${t}s"
    echo "$name: exit $rc$nogpu"
    if grep -qE "$re" "$OUT/$name.txt"; then
        grep -E "$re" "$OUT/$name.txt" | tail -14
    else
        tail -8 "$OUT/$name.txt"
    fi
    keep "$name"
}

if want info; then
    echo "GPUs: $gpus"
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
    else
        echo "nvidia-smi: not on this machine"
    fi
    echo "NCCL: ${nccl_lib:-not found} ($(grep -aoE -m1 'NCCL version [0-9][0-9.+a-z]*' \
        "${nccl_lib:-/dev/null}" 2>/dev/null | head -1))"
    echo "CUDA runtime: $(ls "$dir"/lib/libcudart.so.* 2>/dev/null | head -1)"
    if command -v cuobjdump >/dev/null; then
        echo "machine code and PTX in dtr:"
        cuobjdump --list-elf "$b/dtr" | grep -oE 'sm_[0-9a-z]+' | sort | uniq -c
        cuobjdump --list-ptx "$b/dtr" | grep -oE 'sm_[0-9a-z]+' | sort | uniq -c
    else
        echo "cuobjdump: not on this machine"
    fi
    echo "info: exit 0$nogpu"
fi
if want kernels; then
    part kernels 120 "check|skipped|FAIL" "$b/cuda_bench"
fi
if want grad; then
    for t in grad:grad group:param_group; do # (part name: binary tests/grad/<name>_mpi_test)
        DTR_TEST_SPACE=cuda part "${t%%:*}_cuda" 150 "FAIL|passed|skipped" mpirun -x DTR_TEST_SPACE \
            -x LD_LIBRARY_PATH --oversubscribe -n 8 "$b/${t#*:}_mpi_test_bin"
    done
fi
if want nccl; then
    for k in nccl-id nccl-comm; do
        part "exec_$k" 150 "plans on|FAIL|skipped" mpirun -x LD_LIBRARY_PATH -n 1 \
            "$b/mpi_exec_test_bin" --memory cuda --backend "$k" --cases "$cases" --seed 20261128
    done
fi
if want adopt; then
    part adopt 90 "Synthesis|FAIL|fail|skip" "$b/nccl_adopt_test" --verbose
fi
if want checkpoint; then
    DTR_TEST_SPACE=cuda part checkpoint 90 "Synthesis|FAIL|skip" "$b/space_test" --verbose
fi
if want model; then
    DTR_GPU_ONLY=${nogpu:+1} part grad_model 240 "^gpu:|FAIL|passed" \
        bash tests/cli/cli_grad_model.sh "$b/dtr"
fi
if want exec; then
    part gpu_test 240 "plans on|all runs|FAIL|skipped" \
        bash tests/redistribute/executor/mpi_exec_gpu_test.sh "$b/mpi_exec_test_bin"
fi
if want premul; then
    DTR_TEST_SPACE=nccl part premul_nccl 120 "FAIL|passed|skipped" mpirun -x DTR_TEST_SPACE \
        -x LD_LIBRARY_PATH -n 1 "$b/premul_mpi_test_bin"
    DTR_TEST_SPACE=cuda part premul_cuda 200 "FAIL|passed|skipped" mpirun -x DTR_TEST_SPACE \
        -x LD_LIBRARY_PATH --oversubscribe -n 8 "$b/premul_mpi_test_bin"
fi
if want bench; then
    DTR_BIN=$b/dtr CUDA_BENCH_BIN=$b/cuda_bench part bench "$((deadline))" "." \
        bash bench/gpu_bench.sh "$OUT/gpu-bench.md"
fi
if want python; then
    DTR_NCCL_LIB=$dir/lib2/libdtr_nccl.so part python 400 \
        "^(gpu python|torchrun device|  FAILED)" bash python/tests/gpu_python.sh
fi
if want cli; then
    part cli_run 240 "^gpu:|FAIL|passed" bash tests/cli/cli_run.sh "$b/dtr"
    part cli_grad 300 "^gpu:|FAIL|passed" bash tests/cli/cli_grad.sh "$b/dtr"
fi
echo "done at ${SECONDS}s${skipped:+; skipped for the deadline:$skipped}"
