# Sourced by tests/cli/check_lib.sh and tests/backends/mpi/shm_lib.sh: what the test
# scripts that launch many processes share about the cost of a launch.
#
# few: set where each launch is dear, under the sanitizers (ASAN_OPTIONS set: --config=asan)
# and where tools/test.sh asks for a share of the random cases (DTR_CASES_DIV above 1: the
# asan, nocuda and MPICH parts). The scripts' loops then run fewer combinations; the plain
# part runs them all.
few=
if [ -n "${ASAN_OPTIONS:-}" ] || [ "${DTR_CASES_DIV:-1}" -gt 1 ]; then few=1; fi

# launch_asan RANKS: sets `asan` to the ASAN_OPTIONS for the next launch of the dtr CLI on
# RANKS ranks (0: one process, no mpirun). Under AddressSanitizer the leak check at exit,
# with the slow unwinder that Open MPI's suppressions need (.bazelrc), takes 1.5 s of a
# 4-rank launch's 2 s (0.5 s without it). Multi-rank launches check leaks on the first and
# then every fourth launch of a script, memory errors on every launch; single-process runs
# check leaks every time. dtr's own leaks are checked by every C test under --config=asan,
# leak_cycles_test among them. Outside the sanitizers `asan` is empty.
launches=0
launch_asan() {
    asan=${ASAN_OPTIONS:-}
    [ -n "$asan" ] && [ "$1" -gt 0 ] || return 0
    launches=$((launches + 1))
    if [ $((launches % 4)) -ne 1 ]; then
        asan=${asan//detect_leaks=1/detect_leaks=0}
        asan=${asan//fast_unwind_on_malloc=0/fast_unwind_on_malloc=1}
    fi
}
