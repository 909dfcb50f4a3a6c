#!/usr/bin/env bash
# dtr_launch.sh: starts N processes of one command on this machine, without MPI, as torchrun
# does: each gets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, and DTR_GLOO_STORE, a
# fresh directory for the Gloo backend's file store (dtr_context_create_gloo_env), removed
# when they end. Where one process fails, the others are stopped; the exit status is the
# first failure's (0 when every process succeeded).
set -u

usage() {
    cat <<'EOF'
usage: dtr_launch.sh -n N [--store DIR] [--] COMMAND [ARGS...]

Starts N copies of COMMAND on this machine, each with RANK (0..N-1), WORLD_SIZE (N),
LOCAL_RANK, LOCAL_WORLD_SIZE and DTR_GLOO_STORE set, the way torchrun starts a job, so that
a program calling dtr_context_create_gloo_env() joins the others over Gloo with no MPI.

  -n N          the number of processes (1 to 1024)
  --store DIR   the file store's directory (default: a fresh one under $TMPDIR, removed at
                the end; DIR must be empty or absent, and is kept)
  -h, --help    this text

Exit status: 0 when every process succeeded; else the first failing process's status (the
others are sent SIGTERM); 2 for a usage error.
Example: tools/dtr_launch.sh -n 4 bazel-bin/tests/backends/gloo/gloo_exec_test_bin --cases 20
EOF
}

die() {
    echo "dtr_launch.sh: $*" >&2
    echo "run 'dtr_launch.sh --help' for usage" >&2
    exit 2
}

n=""
store=""
while [ $# -gt 0 ]; do
    case "$1" in
    -h | --help) usage; exit 0 ;;
    -n) [ $# -ge 2 ] || die "-n: needs a number"; n=$2; shift 2 ;;
    --store) [ $# -ge 2 ] || die "--store: needs a directory"; store=$2; shift 2 ;;
    --) shift; break ;;
    -*) die "unknown option '$1'" ;;
    *) break ;;
    esac
done
[ -n "$n" ] || die "-n: missing (how many processes)"
[[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 1024 ] || die "-n: '$n' is not a number from 1 to 1024"
[ $# -ge 1 ] || die "no command to run"

keep=1
if [ -z "$store" ]; then
    store=$(mktemp -d "${TMPDIR:-/tmp}/dtr_launch.XXXXXX") || die "cannot make a store directory"
    keep=0
elif [ -e "$store" ] && [ -n "$(ls -A "$store" 2>/dev/null)" ]; then
    die "--store: '$store' is not empty (another job's keys would be read)"
else
    mkdir -p "$store" || die "--store: cannot make '$store'"
fi

pids=()
# Each process is the leader of a process group of its own (set -m below), and a stop is
# sent to the whole group: a process's own children (a shell's `sleep`) stop with it instead
# of holding the job's output open until they end.
stop() {
    for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; done
}
cleanup() {
    stop
    [ "$keep" -eq 1 ] || rm -rf "$store"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

set -m
for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n DTR_GLOO_STORE=$store "$@" &
    pids+=($!)
done
set +m

status=0
declare -A running=()
for p in "${pids[@]}"; do running[$p]=1; done
ended() { # ended PID STATUS: one process is done; the first failure stops the others
    unset "running[$1]"
    if [ "$2" -ne 0 ] && [ "$status" -eq 0 ]; then
        status=$2
        echo "dtr_launch.sh: a process exited with status $2; stopping the others" >&2
        stop
    fi
}
while [ "${#running[@]}" -gt 0 ]; do
    id=""
    wait -n -p id
    rc=$?
    if [ -n "${id:-}" ]; then
        ended "$id" "$rc"
        continue
    fi
    # wait -n found none to report (bash answers 127 where processes ended together and
    # their statuses were taken in at once): ask each by its pid, whose status bash keeps
    for p in "${!running[@]}"; do
        wait "$p"
        ended "$p" $?
    done
done
pids=()
exit "$status"
