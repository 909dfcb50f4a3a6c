#!/usr/bin/env bash
# Runs the layout rules on the tree (every rule must hold), then on copies that each break
# one rule, where the check must fail and name the violation.
set -u
rules=$1
root=$(dirname "$rules")/../..
passed=0
failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }

if out=$(python3 "$rules" "$root"); then
    ok "the tree: ${out##*$'\n'}"
else
    bad "the tree breaks the rules:"$'\n'"$out"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# expect_violation NAME PATTERN EDIT...: a copy of the tree with EDIT applied must fail with
# a line matching PATTERN
expect_violation() {
    local name=$1 pattern=$2
    shift 2
    rm -rf "$work/t" && mkdir -p "$work/t"
    (cd "$root" && cp -rL --parents core placement dtensor numeric redistribute runtime backends autograd grad \
        checkpoint cli pattern tests \
        "$work/t" 2>/dev/null)
    (cd "$work/t" && eval "$@")
    local out rc
    out=$(python3 "$rules" "$work/t")
    rc=$?
    if [ $rc -eq 1 ] && grep -q -- "$pattern" <<<"$out"; then
        ok "$name: $(grep -m1 -- "$pattern" <<<"$out")"
    else
        bad "$name: exit $rc, no line matching '$pattern' in: $out"
    fi
}
expect_violation "planner including the executor" \
    'redistribute/planner/plan.c: includes "redistribute/executor/executor.h"' \
    "sed -i '1i #include \"redistribute/executor/executor.h\"' redistribute/planner/plan.c"
expect_violation "a backend including the executor's internals" \
    'backends/mpi/mpi.c: includes "redistribute/executor/internal.h"' \
    "sed -i '1i #include \"redistribute/executor/internal.h\"' backends/mpi/mpi.c"
expect_violation "the executor including the planner's internals" \
    'redistribute/executor/copy.c: includes "redistribute/planner/internal.h"' \
    "sed -i '1i #include \"redistribute/planner/internal.h\"' redistribute/executor/copy.c"
expect_violation "a module including another's internal header" \
    'redistribute/planner/plan.c: includes "dtensor/internal.h", the internal header of another folder' \
    "sed -i '1i #include \"dtensor/internal.h\"' redistribute/planner/plan.c"
expect_violation "a backend including dtensor's internal header" \
    'backends/gloo/gloo.c: includes "dtensor/internal.h", the internal header of another folder' \
    "sed -i '1i #include \"dtensor/internal.h\"' backends/gloo/gloo.c"
expect_violation "a file over 800 lines" 'redistribute/executor/copy.c: 1[0-9]* lines, over 800' \
    "for k in \$(seq 900); do echo '/* filler */' >> redistribute/executor/copy.c; done"
expect_violation "a circle" 'circle: .*dtensor/mesh.c.*dtensor/spec.c' \
    "printf 'void dtr__back(void) { dtr_spec_layout(0, 0, 0); }\n' >> dtensor/mesh.c"
expect_violation "a function over 120 lines" 'dtr__long is 1[0-9]* lines, over 120' \
    "{ echo 'void dtr__long(void) {'; for k in \$(seq 130); do echo '    (void)0;'; done; echo '}'; } >> core/log.c"
expect_violation "a test over 120 lines" 'tests/redistribute/planner/test_cache.c:[0-9]*: long_test is 1[0-9]* lines, over 120' \
    "{ echo 'static void long_test(void) {'; for k in \$(seq 130); do echo '    (void)0;'; done; echo '}'; } >> tests/redistribute/planner/test_cache.c"
expect_violation "a test including the planner's internals" \
    'tests/redistribute/planner/test_plan.c: includes "redistribute/planner/internal.h"' \
    "sed -i '1i #include \"redistribute/planner/internal.h\"' tests/redistribute/planner/test_plan.c"
expect_violation "the CLI including a library internal" 'cli/cli.c: includes "core/common.h"' \
    "sed -i '1i #include \"core/common.h\"' cli/cli.c"
expect_violation "a folder the rules do not know" 'tests/newfolder/: holds C sources but has no entry' \
    "mkdir -p tests/newfolder && echo 'int x;' > tests/newfolder/x.c"

echo "layout rules: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
