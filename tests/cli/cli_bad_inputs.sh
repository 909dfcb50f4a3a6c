#!/usr/bin/env bash
# The bad-input table (tests/data/bad_inputs.txt) through `dtr layout`: each row must exit 2,
# print nothing on stdout, and print exactly one line on stderr holding the row's message.
# Then the usage errors that only the CLI has. Usage: cli_bad_inputs.sh DTR TABLE
set -u
dtr=$1
table=$2
pass=0
fail=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# expect_usage_error FRAGMENT ARGS...: exit 2, no stdout, one stderr line containing FRAGMENT.
expect_usage_error() {
    local fragment=$1
    shift
    "$dtr" "$@" >"$out" 2>"$err"
    local rc=$? lines
    lines=$(wc -l <"$err")
    if [ "$rc" -eq 2 ] && [ ! -s "$out" ] && [ "$lines" -eq 1 ] && grep -qF -- "$fragment" "$err"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        printf 'FAIL: dtr'; printf ' %q' "$@"; printf '\n'
        printf '  exit %s (want 2), %s stderr lines (want 1), stdout %s bytes (want 0)\n' \
            "$rc" "$lines" "$(wc -c <"$out")"
        printf '  want fragment: %s\n  got: %s\n' "$fragment" "$(head -3 "$err")"
    fi
}

rows=0
while IFS= read -r line; do
    case "$line" in '#'* | '') continue ;; esac
    IFS='|' read -r mesh ranks shape placements dtype status fragment <<<"${line// | /|}"
    for v in mesh ranks shape placements dtype fragment; do
        [ "${!v}" = "<empty>" ] && printf -v "$v" '%s' ""
    done
    args=(layout --mesh "$mesh" --shape "$shape" --placements "$placements" --dtype "$dtype")
    [ "$ranks" != "-" ] && args+=(--ranks "$ranks")
    rows=$((rows + 1))
    expect_usage_error "$fragment" "${args[@]}"
done <"$table"
if [ "$rows" -lt 25 ]; then
    echo "FAIL: only $rows rows in $table (want at least 25)"
    fail=$((fail + 1))
fi

# Usage errors only the CLI can make.
ok=(--mesh 2x2 --shape 4x4 --placements 'S(0),R')
expect_usage_error "missing command (see 'dtr --help')"
expect_usage_error "dtr: unknown command 'lay'" lay
expect_usage_error "dtr: unknown command 'nope'" help nope
expect_usage_error "--mesh is required" layout --shape 4x4 --placements 'S(0)'
expect_usage_error "--shape is required" layout --mesh 4 --placements 'S(0)'
expect_usage_error "--placements is required" layout --mesh 4 --shape 4
expect_usage_error "unknown option '--mesg'" layout --mesg 4 --shape 4 --placements 'S(0)'
expect_usage_error "unknown option '-x'" layout -x "${ok[@]}"
expect_usage_error "--mesh needs a value" layout --shape 4 --placements 'S(0)' --mesh
expect_usage_error "unexpected argument 'extra'" layout "${ok[@]}" extra
expect_usage_error "--ranks \"0,x,2,3\": item 1 is not an integer" layout "${ok[@]}" --ranks 0,x,2,3
expect_usage_error "--ranks \"0,1,2,99999999999\": item 3 is not an integer" layout "${ok[@]}" --ranks 0,1,2,99999999999


# Every other command's options: malformed, negative, overflowing, out of range, NaN,
# control characters (the error stays one line). `dtr run` refuses before starting MPI work.
p=(plan --mesh 4 --shape 8x8 --from 'S(0)' --to 'S(1)')
expect_usage_error 'dtr plan: --dtype: dtr_dtype_parse: text "f128": not a dtype' "${p[@]}" --dtype f128
expect_usage_error 'dtr plan: --strategy: dtr_strategy_parse: text "best": not a strategy' "${p[@]}" --strategy best
expect_usage_error 'dtr plan: --alpha-us: dtr_cost_model_set: alpha_us "-1": item 0 must be a finite number >= 0' "${p[@]}" --alpha-us -1
expect_usage_error 'dtr plan: --bandwidth-gbps: dtr_cost_model_set: bandwidth_gbps "0": item 0 must be a finite number > 0' "${p[@]}" --bandwidth-gbps 0
expect_usage_error 'dtr plan: --to: dtr_spec_init: placements[0]: S(9): shard dim out of range for a 2-d tensor' plan --mesh 4 --shape 8x8 --from 'S(0)' --to 'S(9)'
expect_usage_error 'dtr plan: --from: dtr_placements_parse: text "": empty placement list' plan --mesh 4 --shape 8x8 --from '' --to 'S(1)'
expect_usage_error 'dtr plan: --mesh: dtr_mesh_parse: sizes: more than 2147483647 ranks in all' plan --mesh 99999999999 --shape 8x8 --from 'S(0)' --to 'S(1)'
expect_usage_error 'dtr plan: --from: dtr_placements_parse: text "S(0)?R": at offset 5' plan --mesh 4 --shape 8x8 --from "$(printf 'S(0)\nR')" --to 'S(1)'
g=(grad --dry-run --world 8)
expect_usage_error "dtr grad: --mode: 'zzz' is not ddp, fsdp or hsdp" "${g[@]}" --mode zzz
expect_usage_error "dtr grad: --world: '-1' is not a rank count >= 1" grad --dry-run --world -1 --mode ddp
expect_usage_error "dtr grad: --numel: '-5' is not a count 0..2^40" "${g[@]}" --mode fsdp --numel -5
expect_usage_error "dtr grad: --numel: '99999999999999999999' is not a count 0..2^40" "${g[@]}" --mode fsdp --numel 99999999999999999999
expect_usage_error "dtr grad: --microbatches: '0' is not a count 1..1000000" "${g[@]}" --mode fsdp --microbatches 0
expect_usage_error "dtr grad: --factor: 'nan' is not a number > 0" "${g[@]}" --mode fsdp --factor nan
expect_usage_error "dtr grad: --world: 8, but --mesh 3x3 has 9 ranks" "${g[@]}" --mode hsdp --mesh 3x3
expect_usage_error "dtr grad: --shard-dim: 5, the gradient has dims 0..1" "${g[@]}" --mode fsdp --shard-dim 5 --shape 4x4
expect_usage_error "dtr run: --iters: '99999999999999' is not a count 0..1000000" run --mesh 4 --shape 8 --from 'S(0)' --to R --iters 99999999999999
# empty values were once read as 0
expect_usage_error "dtr run: --iters: '' is not a count 0..1000000" run --mesh 4 --shape 8 --from 'S(0)' --to R --iters ''
expect_usage_error "dtr grad: --numel: '' is not a count 0..2^40" "${g[@]}" --mode fsdp --numel ''
expect_usage_error "dtr grad: --base: '' is not a number" "${g[@]}" --mode fsdp --base ''
expect_usage_error 'dtr plan: --local-gbps: dtr_cost_model_set: local_gbps "0": item 0 must be a finite number > 0' "${p[@]}" --local-gbps 0
# --dry-run checks --ranks as a run does (it ignored them: garbage and duplicates passed)
expect_usage_error "dtr grad: --ranks: goes with --mesh" "${g[@]}" --mode ddp --ranks 9,9,x
expect_usage_error "dtr grad: --mesh/--ranks: dtr_mesh_parse: ranks: rank 0 appears twice" \
    grad --dry-run --mesh 4 --mode ddp --ranks 0,0,1,2
expect_usage_error "dtr layout: --mesh: dtr_mesh_parse: text \"-2\": dim 0: -2, must be >= 1" \
    layout --mesh -2 --shape 4 --placements R
# a flag given twice: refused by name in every command (it silently took the last value)
twice="given twice (each flag once: the second would replace the first)"
expect_usage_error "dtr layout: --mesh: $twice" layout --mesh 2 --mesh 4 --shape 4 --placements R
expect_usage_error "dtr layout: --json: $twice" layout --mesh 2 --shape 4 --placements R --json --json
expect_usage_error "dtr plan: --to: $twice" "${p[@]}" --to R
expect_usage_error "dtr run: --iters: $twice" run --mesh 4 --shape 8 --from 'S(0)' --to R --iters 2 --iters 3
expect_usage_error "dtr grad: --mode: $twice" "${g[@]}" --mode fsdp --mode ddp
expect_usage_error "dtr reshard: --from: $twice" reshard --from a --from b --to c --consolidate

echo "cli bad inputs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
