#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (ASan + UBSan) and runs them.
#
#   fuzz/run.sh --seconds 60          # CI: about 60 s in all, split over the harnesses
#   fuzz/run.sh --runs 4000000        # the long run: this many executions per harness
#   fuzz/run.sh --only plan --seconds 600
#
# Each harness first replays fuzz/regressions/<name>/ (inputs that once failed) and its seed
# corpus fuzz/corpus/<name>/, then fuzzes, growing a working corpus in .fuzz-build/ (kept
# between runs). A crash or failed property stops the harness; the input is saved under
# .fuzz-build/crashes/<name>/ and the reproducer command printed: add the file to
# fuzz/regressions/<name>/ once fixed. Ends with "fuzz: ...: N passed, N failed" (a harness
# passes when it ran to the end without a crash).
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=0
runs=0
only=""
while [ $# -gt 0 ]; do
    case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz/run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if [ "$seconds" -le 0 ] && [ "$runs" -le 0 ]; then
    echo "fuzz/run.sh: give --seconds N or --runs N (see --help)" >&2
    exit 2
fi

cc=$(command -v clang-14 || command -v clang || true)
if [ -z "$cc" ]; then
    echo "fuzz/run.sh: clang not found (tools/setup.sh installs clang-14 and libclang-rt-14-dev)" >&2
    echo "fuzz: 0 harnesses: 0 passed, 1 failed"
    exit 1
fi

harnesses=(parse layout plan safetensors)
[ -n "$only" ] && harnesses=("$only")
build=${DTR_FUZZ_BUILD:-$PWD/.fuzz-build}
mkdir -p "$build/obj" "$build/include"
# dtr.h includes the generated dtr_version.h (Bazel's //:version_number): the same macros
# from version.bzl, written here since this build does not go through Bazel.
v=$(sed -n 's/^DTR_VERSION = "\(.*\)"$/\1/p' version.bzl)
pre=$(sed -n 's/^DTR_VERSION_PRE = "\(.*\)"$/\1/p' version.bzl)
IFS=. read -r vmaj vmin vpat <<<"$v"
printf '%s\n' "#ifndef DTR_VERSION_H" "#define DTR_VERSION_H" \
    "#define DTR_VERSION_MAJOR $vmaj" "#define DTR_VERSION_MINOR $vmin" \
    "#define DTR_VERSION_PATCH $vpat" "#define DTR_VERSION_STRING \"$v${pre:+-$pre}\"" "#define DTR_VERSION_PRE \"$pre\"" \
    "#define DTR_VERSION_CODE (DTR_VERSION_MAJOR * 10000 + DTR_VERSION_MINOR * 100 + DTR_VERSION_PATCH)" \
    "#endif" >"$build/include/dtr_version.h"
flags=(-g -O1 -std=c11 -I. -I"$build/include" -fno-omit-frame-pointer
       -fsanitize=address,undefined -fno-sanitize-recover=all)

# The library without the MPI backend (the harnesses never communicate), plus the reference
# interpreter, built once per run into objects.
srcs=(core/*.c placement/*.c dtensor/*.c autograd/*.c checkpoint/*.c tests/support/interp.c)
for f in redistribute/planner/*.c redistribute/executor/*.c; do srcs+=("$f"); done
objs=()
for f in "${srcs[@]}"; do
    o="$build/obj/${f//\//_}.o"
    objs+=("$o")
    if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ -n "$(find core placement dtensor redistribute autograd checkpoint tests/support -name '*.h' -newer "$o" -print -quit)" ]; then
        "$cc" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$f" -o "$o" || {
            echo "fuzz: build of $f failed: 0 passed, 1 failed"
            exit 1
        }
    fi
done

if [ "$seconds" -gt 0 ]; then
    per=$((seconds / ${#harnesses[@]}))
    [ "$per" -lt 1 ] && per=1
    budget=(-max_total_time="$per")
else
    budget=(-runs="$runs")
fi

passed=0
failed=0
total_execs=0
crashes=0
for h in "${harnesses[@]}"; do
    if [ ! -f "fuzz/fuzz_$h.c" ]; then
        echo "fuzz/run.sh: no harness '$h' (have: parse layout plan safetensors)" >&2
        failed=$((failed + 1))
        continue
    fi
    bin="$build/fuzz_$h"
    "$cc" "${flags[@]}" -fsanitize=fuzzer "fuzz/fuzz_$h.c" "${objs[@]}" -ljansson -lxxhash -lm -lpthread -o "$bin" || {
        echo "fuzz: $h: build failed"
        failed=$((failed + 1))
        continue
    }
    mkdir -p "$build/corpus/$h" "$build/crashes/$h"
    # 1. the regressions and seeds, each input once
    replay=()
    while IFS= read -r f; do replay+=("$f"); done < <(
        find "fuzz/regressions/$h" "fuzz/corpus/$h" -type f ! -name '.*' 2>/dev/null | sort)
    if [ ${#replay[@]} -gt 0 ]; then
        if ! "$bin" -runs=0 "${replay[@]}" >"$build/$h.replay.log" 2>&1; then
            echo "fuzz: $h: a regression or seed input fails:"
            tail -20 "$build/$h.replay.log"
            failed=$((failed + 1))
            crashes=$((crashes + 1))
            continue
        fi
    fi
    # 2. fuzz: the working corpus grows from the seeds
    log="$build/$h.log"
    start=$(date +%s)
    dirs=("$build/corpus/$h")
    for d in "fuzz/corpus/$h" "fuzz/regressions/$h"; do [ -d "$d" ] && dirs+=("$d"); done
    maxlen=256
    [ "$h" = safetensors ] && maxlen=4096 # whole small files
    "$bin" "${budget[@]}" -max_len=$maxlen -print_final_stats=1 -artifact_prefix="$build/crashes/$h/" \
        "${dirs[@]}" >"$log" 2>&1
    rc=$?
    execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
    execs=${execs:-0}
    total_execs=$((total_execs + execs))
    secs=$(($(date +%s) - start))
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1)
    if [ "$rc" -eq 0 ]; then
        echo "fuzz: $h: $execs executions in ${secs}s, ${cov:-cov: ?}, corpus $(ls "$build/corpus/$h" | wc -l) inputs, no crash"
        passed=$((passed + 1))
    else
        crashes=$((crashes + 1))
        failed=$((failed + 1))
        art=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //')
        echo "fuzz: $h: CRASH after $execs executions (exit $rc); input: ${art:-?}"
        grep -E "fuzz property failed|ERROR: |runtime error|SUMMARY" "$log" | head -5
        echo "  reproduce: $bin ${art:-<input>}"
    fi
done
echo "fuzz: ${#harnesses[@]} harnesses, $total_execs executions, $crashes crashes: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
