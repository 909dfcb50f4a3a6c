#!/usr/bin/env bash
# `dtr grad --model` on seeded random model files (tests/cli/grad_models.py draws them: 1-12
# parameters of 1 to 100,000 elements, 1-3 dims, shapes as text and as arrays, shared groups,
# groups of their own and no group), every mode in turn with a drawn reduce dtype, microbatch
# count, 2 or 4 ranks and mesh: both real ways (per tensor, parameter groups pipelined)
# verified against the exact mean. Prints the seed; a failing case prints its run and file.
# Usage: cli_grad_model_random.sh DTR [CASES] [SEED]   (DTR_SEED also sets the seed; CASES
# defaults to 36, a fifth of that where launches are dear: check_lib.sh's `few`)
set -u
dtr=$1
source "$(dirname "$0")/check_lib.sh"
cases=${2:-36}
[ -n "$few" ] && [ -z "${2:-}" ] && cases=9
seed=${3:-${DTR_SEED:-20261128}}
dir=$(mktemp -d)
trap 'rm -rf "$out" "$err" "$dir"' EXIT
echo "cli_grad_model_random: seed $seed, $cases cases (rerun: bash tests/cli/cli_grad_model_random.sh bazel-bin/cli/dtr $cases $seed)"
python3 "$(dirname "$0")/grad_models.py" "$seed" "$cases" "$dir" >"$dir/cases" || exit 1
while read -r i n mode mesh dt micro file <&3; do
    before=$fail
    check "case $i: $mode on $n ranks, mesh $mesh, $dt, $micro microbatches" "$n" 0 \
        '"verified":true,' "" \
        grad --mode "$mode" --mesh "$mesh" --model "$file" --dtype "$dt" --microbatches "$micro" \
        --iters 1 --verify --json
    if [ "$fail" -ne "$before" ]; then
        echo "  seed $seed, case $i, model file:"
        sed 's/^/    /' "$file"
        echo
    fi
done 3<"$dir/cases"
finish cli_grad_model_random
