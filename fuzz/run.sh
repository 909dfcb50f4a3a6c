#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (ASan + UBSan) and runs them, then the two
# script targets: cli (fuzz/cli_fuzz.py: the dtr CLI's arguments and input files, layout and
# plan directly, run, grad and reshard under mpirun -n 2) and py (fuzz/py_fuzz.py: the Python
# API under mpirun -n 2, arguments wrong on every rank or on one).
#
#   fuzz/run.sh --seconds 60          # CI: about 60 s of fuzzing in all, split over the targets
#   fuzz/run.sh --runs 4000000        # the long run: this many executions per harness
#   fuzz/run.sh --only plan --seconds 600
#   fuzz/run.sh --only cli --seconds 300    # (or --only py; with --runs they get 60 s each)
#
# Each harness first replays fuzz/regressions/<name>/ (inputs that once failed) and its seed
# corpus fuzz/corpus/<name>/, then fuzzes, growing a working corpus in .fuzz-build/ (kept
# between runs). A crash or failed property stops the harness; the input is saved under
# .fuzz-build/crashes/<name>/ and the reproducer command printed: add the file to
# fuzz/regressions/<name>/ once fixed. cli and py replay fuzz/regressions/cli/ and py/, save a
# failing case there themselves and print its seed and command (logs: .fuzz-build/cli.log,
# py.log). cli needs Bazel (bazel build //cli:dtr), py the virtual environment of
# python/tests/run.sh (DTR_PY_VENV; dtr installed into it from ./python where it is missing).
# Ends with "fuzz: ...: N passed, N failed" (a target passes when it ran to the end without a
# crash or failed property).
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
    -h | --help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "fuzz/run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if [ "$seconds" -le 0 ] && [ "$runs" -le 0 ]; then
    echo "fuzz/run.sh: give --seconds N or --runs N (see --help)" >&2
    exit 2
fi

libfuzzer=(parse layout plan safetensors)
targets=("${libfuzzer[@]}" cli py)
[ -n "$only" ] && targets=("$only")
build=${DTR_FUZZ_BUILD:-$PWD/.fuzz-build}
mkdir -p "$build"
if [ "$seconds" -gt 0 ]; then
    per=$((seconds / ${#targets[@]}))
    [ "$per" -lt 1 ] && per=1
    budget=(-max_total_time="$per")
    script_secs=$per
else
    budget=(-runs="$runs")
    script_secs=60 # cli and py count no executions: a minute each in the long run
fi

# The libFuzzer harnesses' objects: the library without the MPI backend (the harnesses never
# communicate), plus the reference interpreter, built once per run. Sets cc and objs; fails
# when clang or the build is missing.
build_libfuzzer() {
    cc=$(command -v clang-14 || command -v clang || true)
    if [ -z "$cc" ]; then
        echo "fuzz/run.sh: clang not found (tools/setup.sh installs clang-14 and libclang-rt-14-dev)" >&2
        return 1
    fi
    mkdir -p "$build/obj" "$build/include"
    # dtr.h includes the generated dtr_version.h (Bazel's //:version_number): the same macros
    # from version.bzl, written here since this build does not go through Bazel.
    local v pre vmaj vmin vpat f o
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
    local srcs=(core/*.c placement/*.c dtensor/*.c numeric/*.c autograd/*.c grad/*.c checkpoint/*.c tests/support/interp.c)
    for f in redistribute/planner/*.c redistribute/executor/*.c runtime/*.c; do srcs+=("$f"); done
    objs=()
    for f in "${srcs[@]}"; do
        o="$build/obj/${f//\//_}.o"
        objs+=("$o")
        if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ -n "$(find core placement dtensor numeric redistribute runtime autograd grad checkpoint tests/support -name '*.h' -newer "$o" -print -quit)" ]; then
            "$cc" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$f" -o "$o" || {
                echo "fuzz: build of $f failed"
                return 1
            }
        fi
    done
}

total_execs=0
crashes=0
cases=0

# One libFuzzer harness: build, replay, fuzz. Returns 0 when it ran to the end without a crash.
run_libfuzzer() {
    local h=$1 bin="$build/fuzz_$1" replay=() f d log start rc execs secs cov art maxlen dirs
    "$cc" "${flags[@]}" -fsanitize=fuzzer "fuzz/fuzz_$h.c" "${objs[@]}" -ljansson -lxxhash -lm -lpthread -o "$bin" || {
        echo "fuzz: $h: build failed"
        return 1
    }
    mkdir -p "$build/corpus/$h" "$build/crashes/$h"
    # 1. the regressions and seeds, each input once
    while IFS= read -r f; do replay+=("$f"); done < <(
        find "fuzz/regressions/$h" "fuzz/corpus/$h" -type f ! -name '.*' 2>/dev/null | sort)
    if [ ${#replay[@]} -gt 0 ]; then
        if ! "$bin" -runs=0 "${replay[@]}" >"$build/$h.replay.log" 2>&1; then
            echo "fuzz: $h: a regression or seed input fails:"
            tail -20 "$build/$h.replay.log"
            crashes=$((crashes + 1))
            return 1
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
        return 0
    fi
    crashes=$((crashes + 1))
    art=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //')
    echo "fuzz: $h: CRASH after $execs executions (exit $rc); input: ${art:-?}"
    grep -E "fuzz property failed|ERROR: |runtime error|SUMMARY" "$log" | head -5
    echo "  reproduce: $bin ${art:-<input>}"
    return 1
}

# What a script target (cli, py) printed, in short: its failures and its last line "<t> fuzz:
# N cases, K failed" (counted into the summary). Returns 0 when it passed.
script_result() {
    local t=$1 rc=$2 log="$build/$1.log" start=$3 n last
    last=$(grep -aE "^$t fuzz: [0-9]+ cases, [0-9]+ failed$" "$log" | tail -1)
    n=$(sed -E 's/.*: ([0-9]+) cases.*/\1/' <<<"${last:-: 0 cases}")
    cases=$((cases + n))
    if [ "$rc" -eq 0 ] && [ -n "$last" ]; then
        echo "fuzz: $t: $n cases in $(($(date +%s) - start))s, no failure ($(grep -am1 'seed' "$log" | sed 's/.*\(seed [0-9]*\).*/\1/'))"
        return 0
    fi
    crashes=$((crashes + 1))
    [ "$rc" -eq 124 ] && echo "fuzz: $t: stopped by the timeout (a hang)"
    echo "fuzz: $t: FAILED (exit $rc): ${last:-no summary line}; full log: $log"
    grep -aE "^$t fuzz: (seed|FAIL|HANG)|^  (command|rank|  ->|saved|replay)" "$log" | cut -c1-400 | head -16
    # (no summary and no failure named: what it printed last, mpirun's banners aside)
    grep -qaE "^$t fuzz: (FAIL|HANG)" "$log" || [ -n "$last" ] ||
        grep -avE '^-----|^$|Primary job|non-zero|aborted|mpirun detected|to be terminated|Process name|Exit code' \
            "$log" | tail -5
    return 1
}

# cli: the dtr binary Bazel builds (the fuzz part runs after the plain part built it)
run_cli() {
    local start dtr rc
    start=$(date +%s)
    if ! bazel build --noshow_progress //cli:dtr >"$build/cli.build.log" 2>&1; then
        echo "fuzz: cli: bazel build //cli:dtr failed:"
        tail -5 "$build/cli.build.log"
        return 1
    fi
    dtr="$(bazel info bazel-bin 2>/dev/null)/cli/dtr"
    timeout $((script_secs + 120)) python3 fuzz/cli_fuzz.py --dtr "$dtr" --seconds "$script_secs" \
        >"$build/cli.log" 2>&1
    rc=$?
    script_result cli "$rc" "$start"
}

# py: the virtual environment python/tests/run.sh makes, this tree's dtr installed there as it
# does (never skipped: a target that cannot run fails, saying why)
run_py() {
    local start venv py rc
    start=$(date +%s)
    venv=${DTR_PY_VENV:-$HOME/.cache/dtr/py-venv}
    py="$venv/bin/python"
    if ! "$py" -c 'import numpy, mpi4py' >/dev/null 2>&1; then
        { [ -x "$py" ] || python3 -m venv "$venv"; } && "$venv/bin/pip" install -q numpy mpi4py \
            >"$build/py.install.log" 2>&1
    fi
    # this tree's package, always: a venv another checkout or an older run installed into
    # would fuzz other code (as python/tests/run.sh does, about 40 s)
    echo "fuzz: py: installing ./python into $venv (pip install ./python)"
    "$venv/bin/pip" install -q --force-reinstall --no-deps ./python >>"$build/py.install.log" 2>&1
    if ! (cd "$build" && "$py" -c 'import dtr, numpy, mpi4py') >/dev/null 2>&1; then
        echo "fuzz: py: FAILED: no Python environment with dtr, numpy and mpi4py at $venv" \
            "(see $build/py.install.log; bash python/tests/run.sh makes it)"
        tail -3 "$build/py.install.log" 2>/dev/null
        return 1
    fi
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader} \
        OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none} \
        timeout $((script_secs + 120)) mpirun --oversubscribe -n 2 "$py" fuzz/py_fuzz.py \
        --seconds "$script_secs" >"$build/py.log" 2>&1
    rc=$?
    script_result py "$rc" "$start"
}

passed=0
failed=0
built=""
for t in "${targets[@]}"; do
    case $t in
    cli) run_cli ;;
    py) run_py ;;
    *)
        if [ ! -f "fuzz/fuzz_$t.c" ]; then
            echo "fuzz/run.sh: no target '$t' (have: ${libfuzzer[*]} cli py)" >&2
            false
        else
            [ -z "$built" ] && { build_libfuzzer && built=yes || built=no; }
            [ "$built" = yes ] && run_libfuzzer "$t"
        fi
        ;;
    esac && passed=$((passed + 1)) || failed=$((failed + 1))
done
echo "fuzz: ${#targets[@]} targets, $total_execs executions, $cases cases, $crashes crashes: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
