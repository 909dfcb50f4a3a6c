#!/usr/bin/env bash
# dist/sources.txt against Bazel's targets (tests/tools/lib_sources.py), then on copies that
# drop a listed file or list one no target has, where it must fail naming the file.
# Usage: lib_sources_test.sh (in the checkout; runs `bazel query`)
set -u
cd "$(dirname "$0")/../.."
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! bazel query --noshow_progress 'kind("source file", deps(//dist:libdtr.so))' \
    >"$work/libdtr" 2>"$work/err"; then
    bad "bazel query //dist:libdtr.so: $(tail -3 "$work/err")"
fi
# companion NAME FILES...: the sources of //dist:libdtr_NAME.so that libdtr.so lacks, into
# $work/NAME; where Bazel has no such target (the toolkit not found here), FILES as labels
companion() {
    local name=$1
    shift
    if bazel query --noshow_progress "//dist:libdtr_$name.so" >/dev/null 2>&1; then
        bazel query --noshow_progress \
            "kind(\"source file\", deps(//dist:libdtr_$name.so) except deps(//dist:libdtr.so))" \
            >"$work/$name" 2>"$work/err" || bad "bazel query //dist:libdtr_$name.so: $(tail -3 "$work/err")"
    else
        ls "$@" | sed 's|^\(.*\)/\([^/]*\)$|//\1:\2|' >"$work/$name"
    fi
}
companion gloo backends/gloo/*.c backends/gloo/*.cc
companion cuda backends/cuda/*.c backends/cuda/*.cu
companion nccl backends/nccl/*.c
check="python3 tests/tools/lib_sources.py . $work/libdtr $work/gloo $work/cuda $work/nccl"
if out=$($check); then ok "dist/sources.txt: $out"; else bad "dist/sources.txt:"$'\n'"$out"; fi
# expect_fail NAME PATTERN SED: sources.txt edited by SED must fail with a line matching PATTERN
expect_fail() {
    sed -E "$3" dist/sources.txt >"$work/sources.txt"
    local out
    out=$($check --sources "$work/sources.txt")
    if [ $? -eq 1 ] && grep -q -- "$2" <<<"$out"; then ok "$1: $(grep -m1 -- "$2" <<<"$out")"; else bad "$1: $out"; fi
}
expect_fail "a file dropped" "libdtr.so: redistribute/planner/plan.c is in its Bazel target but not in" \
    '/^redistribute\/planner\/plan.c$/d'
expect_fail "a file no target has" "libdtr.so: core/nowhere.c is listed in .* but not in its Bazel target" \
    's/^core\/abi.c$/core\/abi.c\ncore\/nowhere.c/'
expect_fail "a Gloo file dropped" "libdtr_gloo.so: backends/gloo/gloo.c is in its Bazel target" \
    '/^backends\/gloo\/gloo.c$/d'
expect_fail "a CUDA kernel file dropped" "libdtr_cuda.so: backends/cuda/kernels.cu is in its Bazel target" \
    '/^backends\/cuda\/kernels.cu$/d'
expect_fail "the NCCL backend dropped" "libdtr_nccl.so: backends/nccl/nccl.c is in its Bazel target" \
    '/^backends\/nccl\/nccl.c /d'
echo "lib sources test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
