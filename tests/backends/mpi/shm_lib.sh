# Sourced by mpi_shm_test.sh and mpi_shm_reduce_test.sh: the launcher, and `run` and `check`
# with their tally. The sourcing script sets bin (the test executable), dtr (the CLI), seed
# and name (the executable's name, for the failure lines) first.
# The MPI launcher: Open MPI's by default; --config=mpich sets DTR_MPIRUN=mpirun.mpich.
read -r -a mpirun <<<"${DTR_MPIRUN:-mpirun --oversubscribe}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
passed=0
failed=0
source "$(dirname "${BASH_SOURCE[0]}")/../../support/launch_lib.sh" # few, launch_asan

# run ENV RANKS CASES [ARGS...]: one run of the test executable with ENV (a VAR=value list,
# or -) and any further arguments
run() {
    local env=$1 n=$2 cases=$3 out rc line p f
    shift 3
    [ "$env" = - ] && env=
    # DTR_CASES_DIV divides the case count, rounding up (tools/test.sh's simulated nodes)
    local div=${DTR_CASES_DIV:-1}
    cases=$(((cases + div - 1) / div))
    out=$(env $env timeout 300 "${mpirun[@]}" -n "$n" "$bin" --cases "$cases" --seed "$seed" "$@")
    rc=$?
    echo "$out"
    line=$(grep -oE '[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -1)
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        echo "FAIL: $env mpirun -n $n $name --cases $cases --seed $seed $* (exit $rc)"
        failed=$((failed + 1))
        return
    fi
    read -r p f < <(sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 \2/' <<<"$line")
    passed=$((passed + p))
    failed=$((failed + f))
}

# check ENV RANKS STEP DTR-RUN-ARGS...: a verified redistribution through the executor whose
# plan has a STEP (all_to_all, all_gather, reduce_scatter, all_reduce)
check() {
    local env=$1 n=$2 step=$3 out rc
    shift 3
    [ "$env" = - ] && env=
    launch_asan "$n"
    out=$(env ASAN_OPTIONS="$asan" $env timeout 120 "${mpirun[@]}" -n "$n" "$dtr" run --verify \
        --iters 2 "$@" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && grep -q "$step" <<<"$out" && grep -q 'verified: all' <<<"$out"; then
        passed=$((passed + 1))
        echo "ok: $env dtr run $* on $n ranks"
    else
        failed=$((failed + 1))
        echo "$out"
        echo "FAIL: $env mpirun -n $n dtr run --verify $* (exit $rc)"
    fi
}
