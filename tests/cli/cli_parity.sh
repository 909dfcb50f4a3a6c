#!/usr/bin/env bash
# The parity cases through the CLI on both backends (tests/cli/cli_parity.py): seeded random
# changes in every form, each verified element by element by `dtr run --verify`, under mpirun
# (mpi) and under tools/dtr_launch.sh (gloo; where this dtr has it), on 2 and 4 ranks.
# Usage: cli_parity.sh DTR CLI_PARITY_PY DTR_LAUNCH_SH  (DTR_SEED sets the seed)
set -u
dtr=$1 py=$2 launch=$3
source "$(dirname "$0")/check_lib.sh" # (mpirun, few)
cases=8
[ -n "$few" ] && cases=3
rc=0 passed=0 failed=0
# run ARGS...: one run of cli_parity.py, its counts added to the totals
run() {
    local out p f
    out=$(python3 "$py" "$dtr" "$@")
    [ $? -eq 0 ] || rc=1
    echo "$out"
    read -r p f < <(grep -oE '[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -1 | sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 \2/')
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-1}))
}
for n in 2 4; do
    run "${mpirun[*]}" mpi --cases "$cases" --ranks "$n"
    if "$dtr" run --help | grep -q 'gloo (no MPI'; then
        run "bash $launch" gloo --cases "$cases" --ranks "$n"
    fi
done
echo "cli parity, both backends: $passed passed, $failed failed"
exit $rc
