#!/usr/bin/env bash
# Runs a random-case test executable (the executor's plans or batches) under mpirun on 2,
# 4 and 8 ranks, or with --launch LAUNCHER (tools/dtr_launch.sh: no MPI) first, under it.
# Usage: mpi_cases.sh [--launch LAUNCHER] BINARY [ARGS...]  (ARGS go to every run, e.g. --memory fake;
# DTR_SEED overrides the seed, DTR_EXEC_SPECS the "ranks:cases" list; DTR_CASES_DIV divides
# every case count, rounding up: tools/test.sh's simulated nodes run fewer, over TCP)
set -u
# The MPI launcher: Open MPI's by default; --config=mpich sets DTR_MPIRUN=mpirun.mpich.
read -r -a mpirun <<<"${DTR_MPIRUN:-mpirun --oversubscribe}"
if [ "${1:-}" = --launch ]; then
    mpirun=(bash "$2")
    shift 2
    export DTR_TIMEOUT_S=${DTR_TIMEOUT_S:-60} # (a hung collective fails within a minute)
fi
bin=$1
shift
seed=${DTR_SEED:-20261121}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
fail=0
passed=0
failed=0
for spec in ${DTR_EXEC_SPECS:-2:400 4:400 8:300}; do
    n=${spec%%:*}
    cases=${spec##*:}
    div=${DTR_CASES_DIV:-1}
    cases=$(((cases + div - 1) / div))
    out=$(timeout 300 "${mpirun[@]}" -n "$n" "$bin" --cases "$cases" --seed "$seed" "$@")
    rc=$?
    echo "$out"
    line=$(grep -oE '[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -1)
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        echo "FAIL: ${mpirun[*]} -n $n $(basename "$bin") --cases $cases --seed $seed $* (exit $rc)"
        fail=$((fail + 1))
    fi
    if [ -n "$line" ]; then
        read -r p f < <(sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 \2/' <<<"$line")
        passed=$((passed + p))
        failed=$((failed + f))
    fi
done
[ "$fail" -gt 0 ] && [ "$failed" -eq 0 ] && failed=$fail
echo "executor plans, all runs: $passed passed, $failed failed"
[ "$fail" -eq 0 ]
