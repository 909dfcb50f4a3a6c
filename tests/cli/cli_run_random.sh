#!/usr/bin/env bash
# `dtr run --fill random` and `--input`: random values verified with the tolerance of
# pattern.h on 2, 4 and 8 ranks for every dtype and op (two-stage reductions on 2-d meshes);
# the tolerance printed; the seed reproducible; a run on the files of --dump read back with
# --input; a perturbed result refused; and the usage and input errors.
# Usage: cli_run_random.sh DTR
set -u
dtr=$1
source "$(dirname "$0")/check_lib.sh"
dir=$(mktemp -d)
trap 'rm -rf "$out" "$err" "$dir"' EXIT

# Every dtype and op on 2, 4 and 8 ranks: 1-d P -> R on 2, and on 4 and 8 both mesh dims
# reduced in two steps (P,P -> S(1),R), where avg must be the sum divided once by 2 x (n/2) (integers
# truncated once, not at every step).
# With `few` (check_lib.sh: the sanitizers, or a share of the cases asked for), each rank
# count runs every dtype once and every op once (ops rotated over the dtypes); the plain
# suite runs every pair.
for n in 2 4 8; do
    di=0
    for dt in f32 f64 f16 bf16 i32 i64 u8; do
        di=$((di + 1))
        oi=0
        for op in sum avg max min product; do
            oi=$((oi + 1))
            if [ -n "$few" ] && [ $(((di + n) % 5 + 1)) -ne "$oi" ]; then
                continue
            fi
            if [ "$n" -eq 2 ]; then
                check "$n ranks, $dt, P($op) -> R" "$n" 0 '"verified":true' "" \
                    run --mesh "$n" --shape 33x9 --dtype $dt --from "P($op)" --to R \
                    --fill random --seed $((n * 100 + 7)) --verify --json --iters 0
                continue
            fi
            check "$n ranks, $dt, P($op),P($op) -> S(1),R" "$n" 0 '"verified":true' "" \
                run --mesh "2x$((n / 2))" --shape 30x17 --dtype $dt \
                --from "P($op),P($op)" --to 'S(1),R' --fill random --seed 9 --verify --json --iters 0
        done
    done
done
check "storage-only f8e4m3, random bytes moved" 4 0 '"verified":true' "" \
    run --mesh 2x2 --shape 9x7 --from 'S(0),S(1)' --to 'R,S(0)' --dtype f8e4m3 --fill random \
    --verify --json --iters 0
check "R -> P(sum) divides, within one rounding more" 8 0 '"verified":true' "" \
    run --mesh 2x4 --shape 30x17 --dtype bf16 --from 'R,P' --to 'P,S(0)' --fill random \
    --verify --json --iters 0
check "backward on random gradients" 4 0 '"backward_result":{"placements":["R"],"verified":true' "" \
    run --mesh 4 --shape 16x8 --from 'P' --to 'S(0)' --fill random --backward --verify --json --iters 0

# What is printed: the fill, the seed and the tolerance (factor, u, scale, largest error).
check "JSON: fill and seed" 4 0 '"fill":"random","seed":42,"tolerance":{"exact":false,"factor":5,"u":5.96046448e-08,"scale":"sum|x|","worst_u":' "" \
    run --mesh 4 --shape 64x8 --from 'P' --to 'R' --fill random --seed 42 --verify --json --iters 0
check "JSON: moves are exact" 4 0 '"tolerance":{"exact":true,"factor":0,' "" \
    run --mesh 4 --shape 64x8 --from 'S(0)' --to 'R' --fill random --verify --json --iters 0
check "text: the tolerance" 4 0 'match within |got - want| <= 5 u sum|x| (u = 2^-11 for f16); largest error ' "" \
    run --mesh 4 --shape 64x8 --dtype f16 --from 'P' --to 'S(0)' --fill random --verify --iters 0
check "text: the seed" 4 0 '  fill: random, seed 3' "" \
    run --mesh 4 --shape 64x8 --from 'P' --to 'S(0)' --fill random --seed 3 --iters 0
check "text: products scale by |want|" 4 0 'u |want| (u = 2^-24 for f32)' "" \
    run --mesh 4 --shape 64x8 --from 'P(product)' --to 'R' --fill random --verify --iters 0

# The same seed gives the same bytes; another seed others; the pattern is not random.
mkdir -p "$dir/a" "$dir/b" "$dir/c"
for d in a:5 b:5 c:6; do
    check "dump with seed ${d#*:}" 4 0 '"verified":true' "" \
        run --mesh 2x2 --shape 20x6 --dtype bf16 --from 'P,S(1)' --to 'R,R' --fill random \
        --seed "${d#*:}" --verify --json --iters 0 --dump "$dir/${d%%:*}"
done
same=1 other=1
for r in 0 1 2 3; do
    cmp -s "$dir/a/rank$r.in" "$dir/b/rank$r.in" || same=0
    cmp -s "$dir/a/rank$r.in" "$dir/c/rank$r.in" && other=0
done
if [ "$same" -eq 1 ] && [ "$other" -eq 1 ]; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: one seed must give the same bytes (same=$same), two seeds others (other=$other)"
fi

# --input: the files --dump wrote, read back and verified against every rank's file.
check "--input: a random run's sources read back" 4 0 '"verified":true' "" \
    run --mesh 2x2 --shape 20x6 --dtype bf16 --from 'P,S(1)' --to 'R,R' --input "$dir/a" \
    --verify --json --iters 0
check "--input: the result equals the random run's" 4 0 '"fill":"pattern"' "" \
    run --mesh 2x2 --shape 20x6 --dtype bf16 --from 'P,S(1)' --to 'R,R' --iters 0 --json \
    --dump "$dir/c"
mkdir -p "$dir/d"
check "--input: dumped again" 4 0 '' "" \
    run --mesh 2x2 --shape 20x6 --dtype bf16 --from 'P,S(1)' --to 'R,R' --input "$dir/a" \
    --iters 0 --dump "$dir/d"
same=1
for r in 0 1 2 3; do cmp -s "$dir/a/rank$r.out" "$dir/d/rank$r.out" || same=0; done
if [ "$same" -eq 1 ]; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: --input of a dump must give the dump's result"
fi
mkdir -p "$dir/g"
check "dump with --backward" 4 0 '"backward_result":{"placements":["R","S(1)"],"verified":true' "" \
    run --mesh 2x2 --shape 12x6 --dtype bf16 --from 'P,S(1)' --to 'R,S(0)' --fill random \
    --backward --verify --json --iters 0 --dump "$dir/g"
check "--input: the gradient read from rankR.grad_in" 4 0 '"backward_result":{"placements":["R","S(1)"],"verified":true' "" \
    run --mesh 2x2 --shape 12x6 --dtype bf16 --from 'P,S(1)' --to 'R,S(0)' --input "$dir/g" \
    --backward --verify --json --iters 0
check "--input: one element perturbed is found" 4 1 "" "dtr run: verification failed" \
    run --mesh 2x2 --shape 20x6 --dtype bf16 --from 'P,S(1)' --to 'R,R' --input "$dir/a" \
    --verify --inject-mismatch 3 --iters 0
# check_rank_err NAME RANKS WHO FRAGMENT ARGS...: exit 2 (an input file that cannot be
# used, as a bad argument) and the fragment in the errors of the ranks WHO ("ranks 0-3", "rank 2"): each rank reads the files itself and names what it
# found, and rank 0 prints each distinct error once, with the ranks that had it.
check_rank_err() {
    local name=$1 n=$2 who=$3 frag=$4
    shift 4
    check "$name" "$n" 2 "" "" "$@"
    if [ "$(grep -F -- "$frag" "$err" | grep -c "^dtr run: $who: ")" -ne 1 ]; then
        fail=$((fail + 1))
        echo "FAIL: $name: want '$frag' once, from $who"
        sed 's/^/  stderr: /' "$err" | head -5
    fi
}
mkdir -p "$dir/e"
check "dump S(1),R: replicas on mesh dim 1" 4 0 '"verified":true' "" \
    run --mesh 2x2 --shape 20x6 --dtype bf16 --from 'S(1),R' --to 'R,R' --fill random \
    --verify --json --iters 0 --dump "$dir/e"
check "--input: agreeing replicas" 4 0 '"verified":true' "" \
    run --mesh 2x2 --shape 20x6 --dtype bf16 --from 'S(1),R' --to 'R,R' --input "$dir/e" \
    --verify --json --iters 0
printf '\x7f' | dd of="$dir/e/rank1.in" bs=1 seek=3 conv=notrunc status=none
check_rank_err "--input: replicas that disagree" 4 "ranks 0-3" "(rank 1) holds element 1 of contribution 0 with other bytes than a replica before it" \
    run --mesh 2x2 --shape 20x6 --dtype bf16 --from 'S(1),R' --to 'R,R' --input "$dir/e" --verify --iters 0
check_rank_err "--input: a file of the wrong size" 4 "rank 0" "holds 120 bytes, but rank" \
    run --mesh 2x2 --shape 20x6 --dtype f32 --from 'P,S(1)' --to 'R,R' --input "$dir/a" --iters 0
rm -f "$dir/e/rank2.in"
check_rank_err "--input: a missing file" 4 "rank 2" "rank2.in': No such file or directory" \
    run --mesh 2x2 --shape 20x6 --dtype bf16 --from 'P,S(1)' --to 'R,R' --input "$dir/e" --iters 0

# A perturbed result is refused, with the tolerance it was held to.
check "random fill: a flipped byte is found" 4 1 "" "allowed: |got - want| <= 5 u sum|x|" \
    run --mesh 4 --shape 30x17 --dtype f16 --from P --to R --fill random --verify \
    --inject-mismatch 2 --iters 0

# Usage errors: one line from rank 0, exit 2.
check "bad --fill" 2 2 "" "--fill: 'noise' is not pattern or random" \
    run --mesh 2 --shape 8 --from P --to R --fill noise
check "--seed without --fill random" 2 2 "" "--seed: seeds the random fill only" \
    run --mesh 2 --shape 8 --from P --to R --seed 4
check "bad --seed" 2 2 "" "--seed: '-1' is not a seed 0..2^63-1" \
    run --mesh 2 --shape 8 --from P --to R --fill random --seed -1
check "--input with --fill random" 2 2 "" "--input: reads the source blocks; --fill random fills them: pick one" \
    run --mesh 2 --shape 8 --from P --to R --fill random --input "$dir/a"
check "--input not a directory" 2 2 "" "--input: '$dir/none' is not an existing directory" \
    run --mesh 2 --shape 8 --from P --to R --input "$dir/none"
finish "dtr run random fills"
