#!/usr/bin/env bash
# The test suite: installs what it needs, then runs parts of it.
#
#   bash tools/test.sh          the quick check (6.5 minutes on a fresh clone, 2 cores):
#                               every test target once (part 1, `plain`), the docs checked
#                               against the tree (part 1a, `docs`), the installed trees
#                               checked from outside (part 6, `install`) and the Python
#                               package (part 7, `python`)
#   bash tools/test.sh --all    the whole matrix below (15-32 minutes there): what CI runs
#   bash tools/test.sh --help   this text
#
# The parts:
#   1. `bazel test //...`                       (the build users get),
#   1a. docs                                    (tests/tools/docs_test.sh: every command a
#                                                doc shows is run and its output compared,
#                                                JSON samples checked against docs/json.md,
#                                                cited paths must exist, measured tables
#                                                must carry a date and their command;
#                                                and tests/tools/module_map.sh: the module
#                                                map in docs/design.md, the layout rules,
#                                                dtr.h and dist/BUILD agree; and
#                                                tests/tools/results_page_test.sh:
#                                                docs/results.md is the page of the figures
#                                                in docs/results/; about 15 s),
#   1b. nodes                                   (the multi-rank suites over 2 simulated nodes,
#                                                tools/mpirun_nodes.sh: 2 x 2 and 2 x 4 ranks,
#                                                each group's path checked; a fifth of the
#                                                random cases, TCP between nodes being slow;
#                                                the reductions again over 3 nodes),
#   2. `bazel test --config=asan //...`         (the same tests under AddressSanitizer and
#                                                UndefinedBehaviorSanitizer, leaks checked;
#                                                a fifth of the random cases, each launch
#                                                costing seconds there),
#   3. `fuzz/run.sh --seconds 60`               (the libFuzzer harnesses, the CLI and
#                                                Python API fuzzers, a short run),
#   4. nocuda                                   (the build where no CUDA toolkit is found:
#                                                `bazel build --config=nocuda //...`, the
#                                                CUDA/NCCL targets dropping out; then the
#                                                tests whose code changes with it, those
#                                                built on the CUDA or NCCL backend and the
#                                                CLI's, on a fifth of the random cases;
#                                                every other test compiles to the same code
#                                                as in the plain part),
#   5. `bazel test --config=mpich`              (the tests built on MPI, built against
#                                                MPICH and launched with mpirun.mpich; a
#                                                fifth of the random cases, which the plain
#                                                part runs in full; the other tests compile
#                                                to the same code as in the plain part),
#   6. install                                  (tools/install.sh into temporary prefixes for
#                                                Open MPI and MPICH, with their .deb files;
#                                                tests/install/run.sh builds programs outside
#                                                the tree from them and runs them),
#   7. python                                   (python/tests/run.sh: `pip install ./python`
#                                                into a virtual environment, the wheel's
#                                                contents, pytest on 1, 2 and 4 ranks),
#   7b. gpupack                                 (tests/tools/gpu_pack_test.sh: the GPU pack,
#                                                tools/gpu_device_pack.sh, run in a bare root
#                                                without a GPU, ssh, Criterion or MPI; every
#                                                part must start, skip for want of a GPU and
#                                                end; about 15 s),
#   8. torch                                    (not in --all: name it in DTR_TEST_PARTS;
#                                                python/tests/run.sh --torch: the same in
#                                                the PyTorch environment, about 5 GiB from
#                                                PyPI on first use, where the torch tests,
#                                                the differential test against DTensor and
#                                                the Python example run too),
# sums the test cases every part reported and ends with one line "N passed, N failed".
# DTR_TEST_PARTS picks parts by name (it overrides --all); other arguments go to `bazel test`. Where the toolkit is found, the CUDA code is compiled in parts 1 and 2 and
# its GPU tests skip (printing why) when no GPU is visible.
#
# Counting: a Criterion target reports "Synthesis: Tested: T | Passing: P | Failing: F |
# Crashing: C"; a script target ends with "...: P passed, F failed". A target that reports
# nothing countable, or a Criterion target that ran zero tests, counts as one failure, so a
# suite that silently runs nothing cannot pass.
set -uo pipefail
cd "$(dirname "$0")/.."

all_parts="plain docs nodes asan fuzz nocuda mpich install python gpupack"
parts="plain docs install python"
args=()
for a in "$@"; do
    case $a in
    --all) parts=$all_parts ;;
    -h | --help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) args+=("$a") ;;
    esac
done
set -- "${args[@]+"${args[@]}"}"
parts=${DTR_TEST_PARTS:-$parts}
bash tools/setup.sh || exit 1
passed=0
failed=0
failed_parts="" failed_where=""
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT

# The multi-rank suites the nodes part runs over simulated nodes.
node_targets=(
    //tests/redistribute/executor:mpi_exec_test //tests/redistribute/executor:mpi_exec_staged_test
    //tests/redistribute/executor:mpi_exec_slices_test //tests/redistribute/executor:mpi_exec_errors_test
    //tests/redistribute/executor:mpi_batch_test //tests/redistribute/executor:mpi_batch_staged_test
    //tests/redistribute/executor:mpi_batch_spans_test //tests/redistribute/executor:mpi_batch_packed_test
    //tests/backends/mpi:mpi_shm_test //tests/backends/mpi:mpi_shm_reduce_test
    //tests/grad:grad_mpi_test //tests/grad:param_group_mpi_test
    //tests/autograd:tape_mpi_test //tests/dtensor:mpi_layout_test
    //tests/redistribute/executor:mpi_cross_test //tests/redistribute/executor:mpi_fp8_test
    //tests/cli:cli_grad_model_random_test
)

# suite LABEL [BAZEL FLAGS...] [-- -EXCLUDED_TARGET... | -- TARGET...]: one `bazel test`
# (of //... less the excluded targets, or of the targets named), its cases added to the tally.
suite() {
    local label=$1
    shift
    local opts=() excluded=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
    if [ $# -gt 0 ]; then
        shift
        if [[ "${1:-}" == -* ]]; then excluded=(-- //... "$@"); else excluded=(-- "$@"); fi
    fi
    set -- "${opts[@]}"
    local flags=(--noshow_progress "$@")
    [ "${CI:-}" = true ] && flags+=(--color=no --curses=no)
    [ ${#excluded[@]} -gt 0 ] || excluded=(-- //...)
    echo "== $label: bazel test ${*:-} ${excluded[*]:1}"
    bazel test "${flags[@]}" "${extra[@]}" "${excluded[@]}" 2>&1 | tee "$summary" |
        grep -vE '^(INFO: From |\(cd |  exec env|    [A-Z]+=|  /usr/share/bazel)'
    local bazel_rc=${PIPESTATUS[0]}
    local testlogs p=0 f=0 targets=0
    testlogs=$(bazel info "$@" bazel-testlogs 2>/dev/null)
    while IFS= read -r target; do
        local log="$testlogs/${target#//}"
        log="${log/://}/test.log"
        targets=$((targets + 1))
        if [ ! -f "$log" ]; then
            echo "test.sh: $label: $target: no test log (did it build?)"
            failed_where+=" $label:$target(no log)"
            f=$((f + 1))
            continue
        fi
        local synth plain
        synth=$(grep -a 'Synthesis: Tested:' "$log" | tail -1)
        plain=$(grep -aoE '[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
        if [ -n "$synth" ]; then
            local t tp tf tc
            read -r t tp tf tc < <(sed -E 's/.*Tested: ([0-9]+) \| Passing: ([0-9]+) \| Failing: ([0-9]+) \| Crashing: ([0-9]+).*/\1 \2 \3 \4/' <<<"$synth")
            if [ "$t" -eq 0 ]; then
                echo "test.sh: $label: $target ran no test"
            failed_where+=" $label:$target(no test)"
                f=$((f + 1))
            fi
            p=$((p + tp))
            f=$((f + tf + tc))
            [ $((tf + tc)) -eq 0 ] || failed_where+=" $label:$target($((tf + tc)))"
        elif [ -n "$plain" ]; then
            local sp sf
            read -r sp sf < <(sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 \2/' <<<"$plain")
            p=$((p + sp))
            f=$((f + sf))
            [ "$sf" -eq 0 ] || failed_where+=" $label:$target($sf)"
        else
            echo "test.sh: $label: $target reported no count"
            failed_where+=" $label:$target(no count)"
            f=$((f + 1))
        fi
    done < <(grep -oE '^//[^ ]+ +(\(cached\) )?(PASSED|FAILED|FLAKY|TIMEOUT|NO STATUS|FAILED TO BUILD|INCOMPLETE)' "$summary" | awk '{print $1}' | sort -u)
    local bad
    bad=$(grep -oE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|FLAKY|NO STATUS|FAILED TO BUILD|INCOMPLETE)' \
        "$summary" | awk '{print $1 "=" $NF}' | sort -u | tr '\n' ' ')
    [ -z "$bad" ] || failed_where+=" $label: bazel says ${bad% }"
    if [ "$bazel_rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "test.sh: $label: bazel test exited $bazel_rc"
        f=1
    fi
    echo "== $label: $targets targets, $p passed, $f failed"
    passed=$((passed + p))
    failed=$((failed + f))
}

# The paths every nodes run printed (tests/support/mpi_paths.h), summed: shared memory must have
# carried operations inside the nodes and MPI across them, or the part counts a failure.
node_paths() {
    local logs sums
    logs=$(bazel info bazel-testlogs 2>/dev/null)
    sums=$(for t in "${node_targets[@]}"; do
        t=${t#//}
        cat "$logs/${t/://}/test.log" 2>/dev/null
    done | grep -aoE '^paths \([^)]*\): [0-9]+ inside a node, [0-9]+ shm ops, [0-9]+ mpi ops; [0-9]+ across nodes, [0-9]+ mpi ops, [0-9]+ hierarchical' |
        sed -E 's/.*: ([0-9]+) inside a node, ([0-9]+) shm ops, ([0-9]+) mpi ops; ([0-9]+) across nodes, ([0-9]+) mpi ops, ([0-9]+) hierarchical/\1 \2 \3 \4 \5 \6/' |
        awk '{for (i = 1; i <= 6; i++) s[i] += $i; n++} END {printf "%d %d %d %d %d %d %d", n, s[1], s[2], s[3], s[4], s[5], s[6]}')
    local n g s m h k x
    read -r n g s m h k x <<<"$sums"
    echo "== nodes: $n runs: $g groups inside a node ($s ops through shared memory, $m through MPI), $h groups across nodes ($k ops through MPI, $x hierarchical)"
    if [ "${n:-0}" -eq 0 ] || [ "${s:-0}" -eq 0 ] || [ "${k:-0}" -eq 0 ] || [ "${x:-0}" -eq 0 ]; then
        echo "test.sh: nodes: no shared-memory operation inside a node, no MPI one across nodes or no hierarchical reduction"
        failed=$((failed + 1))
    fi
}

# pick_tests LABEL EXPR [LEFT_OUT...]: the test targets among a query expression's targets
# (on the plain build), less those left out, into `picked`; fewer than 5 is a failure of the
# part (the query went wrong), and the return status says so.
pick_tests() {
    local label=$1 expr=$2 t
    shift 2
    picked=()
    while IFS= read -r t; do
        [[ " $* " == *" $t "* ]] || picked+=("$t")
    done < <(bazel query --noshow_progress "kind(\".*_test\", $expr)" 2>/dev/null)
    if [ ${#picked[@]} -lt 5 ]; then
        echo "test.sh: $label: the query for its tests found ${#picked[@]}: $expr"
        failed=$((failed + 1))
        return 1
    fi
}

# add_counts LABEL TEXT: the last "LABEL: N passed, N failed" line of TEXT added to the tally
# (none: one failure).
add_counts() {
    local line p f
    line=$(grep -oE "^$1: [0-9]+ passed, [0-9]+ failed" <<<"$2" | tail -1)
    [ -n "$line" ] || line="$1: 0 passed, 1 failed"
    read -r p f < <(sed -E "s/^$1: ([0-9]+) passed, ([0-9]+) failed/\1 \2/" <<<"$line")
    passed=$((passed + p))
    failed=$((failed + f))
}

extra=("$@")
times=""
for part in $parts; do
    part_start=$SECONDS
    failed_before=$failed
    case $part in
    plain) suite plain ;;
    # 2 simulated nodes: -n 4 is 2 x 2, -n 8 is 2 x 4 (tools/mpirun_nodes.sh)
    nodes)
        suite nodes "--test_env=DTR_MPIRUN=$PWD/tools/mpirun_nodes.sh --nodes 2" \
            --test_env=DTR_EXPECT_NODES=2 --test_env=DTR_CASES_DIV=5 -- "${node_targets[@]}"
        node_paths
        # the reductions again over 3 nodes, where the order across nodes shows in the bits
        # (with 2, swapping the two node results gives the same sum)
        suite nodes-3 "--test_env=DTR_MPIRUN=$PWD/tools/mpirun_nodes.sh --nodes 3" \
            --test_env=DTR_CASES_DIV=5 -- //tests/backends/mpi:mpi_shm_reduce_test
        ;;
    nocuda)
        echo "== nocuda: bazel build --config=nocuda //..."
        bazel build --noshow_progress --config=nocuda "${extra[@]}" //... 2>&1 | tail -20
        if [ "${PIPESTATUS[0]}" -ne 0 ]; then
            echo "test.sh: nocuda: the build failed"
            failed=$((failed + 1))
        fi
        # the tests that see the toolkit's absence: those built on the CUDA or NCCL backend
        # (the query runs on the plain build, where they depend on it; mpi_exec_gpu_test and
        # nccl_adopt_test, absent under nocuda, are left out) and the CLI's (its device choice
        # changes)
        if pick_tests nocuda 'rdeps(//..., //backends/cuda:* + //backends/nccl:*) +
                //tests/cli:*' //tests/redistribute/executor:mpi_exec_gpu_test \
                //tests/backends/cuda:nccl_adopt_test; then
            suite nocuda --config=nocuda --test_env=DTR_CASES_DIV=5 -- "${picked[@]}"
        fi
        ;;
    # Every test built on MPI (the others compile to the same code as in the plain part),
    # mpi_exec_errors_test's fault injection and deadlines included.
    mpich)
        if pick_tests mpich 'rdeps(//..., @mpi//:*)'; then
            suite mpich --config=mpich --test_env=DTR_CASES_DIV=5 -- "${picked[@]}"
        fi
        ;;
    install)
        for mpi in openmpi mpich; do
            echo "== install: tools/install.sh --mpi $mpi, tests/install/run.sh"
            dir=$(mktemp -d)
            mpi_flag=(--mpi "$mpi")
            if bash tools/install.sh --prefix "$dir/prefix" "${mpi_flag[@]}" --deb "$dir/deb" >"$dir/log" 2>&1; then
                out=$(bash tests/install/run.sh "$dir/prefix" "$mpi" "$(ls "$dir"/deb/*.deb)" 2>&1)
                echo "$out"
                line=$(grep -oE '[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -1)
                [ -n "$line" ] || line="0 passed, 1 failed"
            else
                cat "$dir/log"
                line="0 passed, 1 failed"
            fi
            rm -rf "$dir"
            read -r p f < <(sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 \2/' <<<"$line")
            passed=$((passed + p))
            failed=$((failed + f))
        done
        ;;
    python | torch)
        flag=()
        [ "$part" = torch ] && flag=(--torch)
        out=$(bash python/tests/run.sh "${flag[@]+"${flag[@]}"}" 2>&1)
        echo "$out" | grep -vE '^[.sFEx]+ +\[ *[0-9]+%\]$' | tail -20
        add_counts python "$out"
        ;;
    docs)
        echo "== docs: tests/tools/docs_test.sh (the docs' commands, JSON, paths and dates)"
        bazel build --noshow_progress //cli:dtr >/dev/null 2>&1
        out=$(bash tests/tools/docs_test.sh "$(bazel info bazel-bin 2>/dev/null)/cli/dtr" 2>&1)
        echo "$out" | tail -20
        add_counts "docs test" "$out"
        echo "== docs: tests/tools/module_map.sh (design.md's module table, the layout rules, dtr.h and the libraries' targets)"
        out=$(bash tests/tools/module_map.sh tests/tools/module_map.py 2>&1)
        echo "$out" | tail -8
        add_counts "module map test" "$out"
        echo "== docs: tests/tools/lib_sources_test.sh (dist/sources.txt, what pip compiles without Bazel, against the libraries' targets)"
        out=$(bash tests/tools/lib_sources_test.sh 2>&1)
        echo "$out" | tail -6
        add_counts "lib sources test" "$out"
        echo "== docs: tests/tools/results_page_test.sh (docs/results.md is the page of docs/results/)"
        out=$(bash tests/tools/results_page_test.sh 2>&1)
        echo "$out" | tail -6
        add_counts "results page test" "$out"
        ;;
    gpupack)
        echo "== gpupack: tests/tools/gpu_pack_test.sh"
        out=$(bash tests/tools/gpu_pack_test.sh 2>&1)
        echo "$out" | tail -40
        add_counts gpu_pack "$out"
        ;;
    asan) suite asan --config=asan --test_env=DTR_CASES_DIV=5 \
        "--test_env=LSAN_OPTIONS=suppressions=$PWD/tools/lsan.supp:print_suppressions=0" ;;
    fuzz)
        echo "== fuzz: fuzz/run.sh --seconds 60"
        out=$(bash fuzz/run.sh --seconds 60 2>&1)
        rc=$?
        echo "$out" | tail -20
        line=$(grep -oE '[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -1)
        if [ -n "$line" ]; then
            read -r p f < <(sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 \2/' <<<"$line")
        else
            p=0 f=1
        fi
        [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
        passed=$((passed + p))
        failed=$((failed + f))
        ;;
    *)
        echo "test.sh: unknown part '$part' in DTR_TEST_PARTS ($all_parts torch)"
        failed=$((failed + 1))
        ;;
    esac
    times+=" $part $((SECONDS - part_start))s"
    [ "$failed" -eq "$failed_before" ] || failed_parts+=" $part(+$((failed - failed_before)))"
done
echo "parts:$times (wall seconds each); cases below"
# (CI keeps the end of the output: where the failures were, named here)
[ "$failed" -eq 0 ] || echo "failed in:$failed_parts; targets:${failed_where:- (none counted by target)}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
