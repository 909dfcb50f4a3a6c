#!/usr/bin/env bash
# The whole test suite: installs what it needs, runs `bazel test //...`, then sums the test
# cases every target reported and ends with one line "N passed, N failed".
#
# Counting: a Criterion target reports "Synthesis: Tested: T | Passing: P | Failing: F |
# Crashing: C"; a script target ends with "...: P passed, F failed". A target that reports
# nothing countable, or a Criterion target that ran zero tests, counts as one failure, so a
# suite that silently runs nothing cannot pass. Extra arguments go to `bazel test`.
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh || exit 1

flags=(--noshow_progress)
[ "${CI:-}" = true ] && flags+=(--color=no --curses=no)
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
bazel test "${flags[@]}" //... "$@" 2>&1 | tee "$summary" |
    grep -vE '^(INFO: From |\(cd |  exec env|    [A-Z]+=|  /usr/share/bazel)'
bazel_rc=${PIPESTATUS[0]}

testlogs=$(bazel info bazel-testlogs 2>/dev/null)
passed=0
failed=0
targets=0
while IFS= read -r target; do
    log="$testlogs/${target#//}"
    log="${log/://}/test.log"
    targets=$((targets + 1))
    if [ ! -f "$log" ]; then
        echo "test.sh: $target: no test log (did it build?)"
        failed=$((failed + 1))
        continue
    fi
    synth=$(grep -a 'Synthesis: Tested:' "$log" | tail -1)
    plain=$(grep -aoE '[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    if [ -n "$synth" ]; then
        read -r t p f c < <(sed -E 's/.*Tested: ([0-9]+) \| Passing: ([0-9]+) \| Failing: ([0-9]+) \| Crashing: ([0-9]+).*/\1 \2 \3 \4/' <<<"$synth")
        if [ "$t" -eq 0 ]; then
            echo "test.sh: $target ran no test"
            failed=$((failed + 1))
        fi
        passed=$((passed + p))
        failed=$((failed + f + c))
    elif [ -n "$plain" ]; then
        read -r p f < <(sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 \2/' <<<"$plain")
        passed=$((passed + p))
        failed=$((failed + f))
    else
        echo "test.sh: $target reported no count"
        failed=$((failed + 1))
    fi
done < <(grep -oE '^//[^ ]+ +(\(cached\) )?(PASSED|FAILED|FLAKY|TIMEOUT|NO STATUS|FAILED TO BUILD|INCOMPLETE)' "$summary" | awk '{print $1}' | sort -u)

if [ "$bazel_rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "test.sh: bazel test exited $bazel_rc"
    failed=1
fi
echo "test targets: $targets; cases below"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$bazel_rc" -eq 0 ]
