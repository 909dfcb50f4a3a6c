#!/usr/bin/env bash
# The main job, as the README's quick start runs it: installs what it needs, builds the
# dtr CLI, and shows what it does. Extra arguments are run as one more dtr command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bazel build --noshow_progress //cli:dtr 2>&1 | grep -E '^(ERROR|WARNING)' || true
dtr=bazel-bin/cli/dtr
[ -x "$dtr" ] || { echo "demo: //cli:dtr did not build" >&2; exit 1; }

show() {
    printf '\n$ dtr'
    for a in "$@"; do
        if [[ $a =~ ^[A-Za-z0-9_./=:-]+$ ]]; then printf ' %s' "$a"; else printf " '%s'" "$a"; fi
    done
    printf '\n'
    "$dtr" "$@"
}

# docs/design.md's nested-sharding example: tensor dim 1 (length 5) split over both mesh dims.
show layout --mesh 2x2 --shape 2x5 --placements 'S(1),S(1)'
# Uneven shards: 5 rows over 4 ranks gives 2,2,1,0 (the empty one sits at offset 5).
show layout --mesh 4 --shape 5x3 --placements 'S(0)' --json
# The planner: the seed algorithm (compat) beside the optimal default, and the lower bound.
show plan --mesh 2x2 --shape 8x8 --from 'S(0),S(1)' --to 'S(1),S(0)' --compare
# A misaligned nested shard: one exchange at the lower bound instead of two gathers.
show plan --mesh 2x2 --shape 1024x1024 --from 'S(0),S(0)' --to 'R,S(0)'
# A reduction blocked by a later shard of its dim: the balanced reduce_exchange, at the bound.
show plan --mesh 2x2 --shape 1024x1024 --from 'P,S(0)' --to 'S(0),S(0)' --compare
# A real redistribution on 4 local ranks (Open MPI): every element checked on every rank.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
printf "\n$ mpirun -n 4 dtr run --mesh 2x2 --shape 64x64 --from 'S(0),R' --to 'R,S(1)' --verify\n"
mpirun --oversubscribe -n 4 "$dtr" run --mesh 2x2 --shape 64x64 --from 'S(0),R' --to 'R,S(1)' --verify
# HSDP gradient reduction on 8 ranks, fp16 with the pre/post factors, 2 microbatches.
printf "\n$ mpirun -n 8 dtr grad --mode hsdp --mesh 2x4 --dtype f16 --microbatches 2 --verify\n"
mpirun --oversubscribe -n 8 "$dtr" grad --mode hsdp --mesh 2x4 --dtype f16 --microbatches 2 --verify
if [ $# -gt 0 ]; then show "$@"; fi
