#!/usr/bin/env bash
# tools/dtr_launch.sh, the launcher without MPI: each process's variables, the exit status
# of the first failure with the others stopped, the store made and removed, and usage errors
# named with exit 2. Usage: dtr_launch.sh LAUNCHER
set -u
launch=$1
pass=0
fail=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# expect NAME WANT_RC STDOUT_FRAGMENT STDERR_FRAGMENT ARGS...
expect() {
    local name=$1 want_rc=$2 want_out=$3 want_err=$4
    shift 4
    timeout 60 bash "$launch" "$@" >"$out" 2>"$err"
    local rc=$? ok=1
    [ "$rc" -eq "$want_rc" ] || ok=0
    if [ -n "$want_out" ]; then grep -qF -- "$want_out" "$out" || ok=0; fi
    if [ -n "$want_err" ]; then grep -qF -- "$want_err" "$err" || ok=0; fi
    if [ "$ok" -eq 1 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $name (exit $rc, want $want_rc)"
        sed 's/^/  stdout: /' "$out" | head -5
        sed 's/^/  stderr: /' "$err" | head -5
    fi
}

expect "help" 0 "usage: dtr_launch.sh -n N" "" --help
expect "no -n" 2 "" "-n: missing" true
expect "-n not a number" 2 "" "-n: 'x' is not a number from 1 to 1024" -n x true
expect "-n zero" 2 "" "-n: '0' is not a number" -n 0 true
expect "no command" 2 "" "no command to run" -n 2
expect "unknown option" 2 "" "unknown option '--bogus'" --bogus -n 2 true

# every process's variables, one line each, sorted
expect "variables" 0 "" "" -n 3 bash -c 'echo "rank $RANK of $WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE store $([ -d "$DTR_GLOO_STORE" ] && echo yes)"'
for r in 0 1 2; do
    if grep -qx "rank $r of 3 local $r/3 store yes" "$out"; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: rank $r's variables: $(cat "$out")"; fi
done

# the first failure's status; the others (sleeping) stopped well before their end
start=$SECONDS
expect "a failure stops the others" 7 "" "a process exited with status 7; stopping the others" \
    -n 3 bash -c '[ "$RANK" = 1 ] && exit 7; sleep 30'
if [ $((SECONDS - start)) -lt 20 ]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: the other processes were not stopped"; fi

# the default store is removed at the end; a given one is kept; a non-empty one refused
expect "store removed" 0 "" "" -n 1 bash -c 'echo "$DTR_GLOO_STORE"'
if [ ! -e "$(cat "$out")" ]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: the store $(cat "$out") was left behind"; fi
dir=$(mktemp -d)
expect "given store kept" 0 "$dir/s" "" -n 1 --store "$dir/s" bash -c 'echo "$DTR_GLOO_STORE"; touch "$DTR_GLOO_STORE/key"'
if [ -e "$dir/s/key" ]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: the given store was not kept"; fi
expect "non-empty store refused" 2 "" "--store: '$dir/s' is not empty" -n 1 --store "$dir/s" true
rm -rf "$dir"

echo "dtr_launch.sh: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
