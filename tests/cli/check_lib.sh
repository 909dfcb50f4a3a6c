# Sourced by the CLI tests (cli_plan.sh, cli_run.sh, cli_grad.sh): one `check` and the tally.
# The sourcing script sets `dtr` (the binary) first.
# The MPI launcher: Open MPI's by default; --config=mpich sets DTR_MPIRUN=mpirun.mpich.
read -r -a mpirun <<<"${DTR_MPIRUN:-mpirun --oversubscribe}"
pass=0
fail=0
source "$(dirname "${BASH_SOURCE[0]}")/../support/launch_lib.sh" # few, launch_asan
# pair_skipped I J: true where `few` leaves out pair (I, J) of two equally long loops (1-based
# indexes): only the diagonal runs, so each value of either loop runs once.
pair_skipped() { [ -n "$few" ] && [ "$1" -ne "$2" ]; }
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none

# check NAME RANKS WANT_RC STDOUT_FRAGMENT STDERR_FRAGMENT ARGS...: runs `dtr ARGS...`
# (RANKS 0: directly; else under mpirun -n RANKS) and wants exit WANT_RC and the fragments
# ("" = not checked). With a stderr fragment, stderr must hold exactly one line starting
# "dtr " or "dtr:" (one rank prints errors, once); run directly, stderr must be that one
# line and stdout empty.
check() {
    local name=$1 n=$2 want_rc=$3 want_out=$4 want_err=$5
    shift 5
    launch_asan "$n"
    if [ "$n" -eq 0 ]; then
        ASAN_OPTIONS=$asan timeout 60 "$dtr" "$@" >"$out" 2>"$err"
    else
        ASAN_OPTIONS=$asan timeout 120 "${mpirun[@]}" -n "$n" "$dtr" "$@" >"$out" 2>"$err"
    fi
    local rc=$? ok=1
    [ "$rc" -eq "$want_rc" ] || ok=0
    if [ -n "$want_out" ]; then grep -qF -- "$want_out" "$out" || ok=0; fi
    if [ -n "$want_err" ]; then
        grep -qF -- "$want_err" "$err" || ok=0
        [ "$(grep -c '^dtr[ :]' "$err")" -eq 1 ] || ok=0
        if [ "$n" -eq 0 ]; then
            [ "$(wc -l <"$err")" -eq 1 ] || ok=0
            [ ! -s "$out" ] || ok=0
        fi
    fi
    if [ "$ok" -eq 1 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $name (exit $rc, want $want_rc)"
        sed 's/^/  stdout: /' "$out" | head -5
        sed 's/^/  stderr: /' "$err" | head -5
    fi
}

# with_rank_args RANK MINE OTHERS CHECK-ARGS...: `check` with dtr wrapped so that rank RANK
# alone gets the arguments MINE appended and the other ranks OTHERS (words)
with_rank_args() {
    local bad=$1 mine=$2 others=$3 real=$dtr wrap
    shift 3
    wrap=$(mktemp)
    printf '%s\n' '#!/bin/bash' 'r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}' \
        "if [ \"\$r\" = $bad ]; then exec \"$real\" \"\$@\" $mine; fi" \
        "exec \"$real\" \"\$@\" $others" >"$wrap"
    chmod +x "$wrap"
    dtr=$wrap
    check "$@"
    dtr=$real
    rm -f "$wrap"
}
# with_rank_env RANK VAR=VALUE CHECK-ARGS...: `check` with rank RANK alone run with VAR=VALUE in
# its environment (mpirun's rank, or RANK under tools/dtr_launch.sh)
with_rank_env() {
    local bad=$1 setting=$2 real=$dtr wrap
    shift 2
    wrap=$(mktemp)
    printf '%s\n' '#!/bin/bash' 'r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${RANK:-0}}}' \
        "if [ \"\$r\" = $bad ]; then export $setting; fi" "exec \"$real\" \"\$@\"" >"$wrap"
    chmod +x "$wrap"
    dtr=$wrap
    check "$@"
    dtr=$real
    rm -f "$wrap"
}
# with_bad_rank RANK CHECK-ARGS...: rank RANK alone gets `--shape 9xq`, the others `--shape
# 8x8` (a bad argument on one rank: every rank must fail at once with its message, not wait
# in a collective for the rank that left)
with_bad_rank() {
    local bad=$1
    shift
    with_rank_args "$bad" "--shape 9xq" "--shape 8x8" "$@"
}

# gpu_check NAME RANKS CMD ARGS...: a GPU path (dtr CMD ARGS... under mpirun -n RANKS, with
# --json --verify among ARGS): verified where a GPU is visible; otherwise the reason, and no
# crash: exit 2 "built without" (no CUDA/NCCL at build time) or exit 1 "no GPU visible" on
# every rank. Prints "gpu: NAME: ..." either way (the GPU machine's run greps for it).
gpu_check() {
    local name=$1 n=$2 cmd=$3
    shift 2
    launch_asan "$n"
    ASAN_OPTIONS=$asan timeout 120 "${mpirun[@]}" -n "$n" "$dtr" "$@" >"$out" 2>"$err"
    local rc=$?
    if [ $rc -eq 0 ] && grep -qF '"verified":true' "$out"; then
        pass=$((pass + 1))
        echo "gpu: $name: verified on a GPU"
    elif [ $rc -eq 2 ] && grep -q "^dtr $cmd: --[a-z]* [a-z]*: this dtr was built without" "$err"; then
        pass=$((pass + 1))
        echo "gpu: $name: skipped: $(head -1 "$err")"
    elif [ $rc -eq 1 ] && [ "$(grep -c 'no GPU visible' "$err")" -eq 1 ] &&
        grep -q "^dtr $cmd: $( ((n > 1)) && echo "ranks 0-$((n - 1))" || echo "rank 0"): .*no GPU visible" "$err"; then
        pass=$((pass + 1))
        echo "gpu: $name: skipped: $(head -1 "$err")"
    else
        fail=$((fail + 1))
        echo "FAIL: gpu: $name (exit $rc)"
        sed 's/^/  stdout: /' "$out" | head -5
        sed 's/^/  stderr: /' "$err" | head -5
    fi
}

# finish LABEL: prints "LABEL: N passed, N failed" (tools/test.sh sums these) and the status.
finish() {
    echo "$1: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
