#!/usr/bin/env bash
# Runs gloo_exec_test on 2, 4 and 8 processes started by tools/dtr_launch.sh (no mpirun).
# Usage: gloo_exec_test.sh LAUNCHER BINARY [ARGS...]  (ARGS go to every run; DTR_SEED
# overrides the seed, DTR_EXEC_SPECS the "ranks:cases" list). Every rank's groups must have
# taken the path DTR_GLOO_SHM says: all of them a shared-memory segment and some operations
# through it (unset or 1: the processes share this host), or none (0).
set -u
launch=$1
bin=$2
shift 2
seed=${DTR_SEED:-20261121}
# a hung collective fails within a minute instead of at Bazel's timeout
export DTR_TIMEOUT_S=${DTR_TIMEOUT_S:-60}
fail=0
passed=0
failed=0
for spec in ${DTR_EXEC_SPECS:-2:200 4:150 8:60}; do
    n=${spec%%:*}
    cases=${spec##*:}
    out=$(timeout 300 bash "$launch" -n "$n" "$bin" --cases "$cases" --seed "$seed" "$@" 2>&1)
    rc=$?
    echo "$out"
    lines=$(grep -cE 'rank [0-9]+: plans on [0-9]+ ranks: [0-9]+ passed, [0-9]+ failed' <<<"$out")
    if [ $rc -ne 0 ] || [ "$lines" -ne "$n" ]; then
        echo "FAIL: dtr_launch.sh -n $n $(basename "$bin") --cases $cases --seed $seed $* (exit $rc, $lines of $n ranks reported)"
        fail=$((fail + 1))
    fi
    while read -r rank groups shared segment; do
        if [ "${DTR_GLOO_SHM:-1}" = 0 ]; then
            ok=$([ "$shared" -eq 0 ] && [ "$segment" -eq 0 ] && echo 1)
        else
            ok=$([ "$shared" -eq "$groups" ] && [ "$groups" -gt 0 ] && [ "$segment" -gt 0 ] && echo 1)
        fi
        if [ -z "$ok" ]; then
            echo "FAIL: rank $rank on $n ranks, DTR_GLOO_SHM=${DTR_GLOO_SHM:-unset}: $groups groups, $shared with shared memory, $segment segment ops"
            fail=$((fail + 1))
        fi
    done < <(sed -nE 's/.*rank ([0-9]+): paths: ([0-9]+) groups, ([0-9]+) with shared memory, ([0-9]+) segment ops.*/\1 \2 \3 \4/p' <<<"$out")
    paths=$(grep -c ': paths: ' <<<"$out")
    if [ "$paths" -ne "$n" ]; then
        echo "FAIL: $paths of $n ranks reported their paths"
        fail=$((fail + 1))
    fi
    while read -r p f; do
        passed=$((passed + p))
        failed=$((failed + f))
    done < <(grep -oE '[0-9]+ passed, [0-9]+ failed' <<<"$out" | sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 \2/')
done
[ "$fail" -gt 0 ] && [ "$failed" -eq 0 ] && failed=$fail
echo "gloo executor plans, all runs and ranks: $passed passed, $failed failed"
[ "$fail" -eq 0 ] && [ "$failed" -eq 0 ]
