#!/usr/bin/env bash
# The differential conformance check against PyTorch DTensor (see conformance.py).
# Usage: bash bench/pytorch/conformance.sh [--cases N] [--seed S] [--only K] [--json F]
#        [--zero-fill]  (many Shard -> Partial(sum) changes) [--casts]  (forward_dtype)
#        [--orders]  (shard orders, as PyTorch's _StridedShard)
#        [--case "MESH SHAPE DTYPE FROM TO [STRATEGY]"]...  (these cases instead of random ones)
set -eu
cd "$(dirname "$0")/../.."
py=$(bash bench/pytorch/venv.sh)
bazel build -c opt //cli:dtr >/dev/null 2>&1 || { echo "conformance.sh: bazel build //cli:dtr failed" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
exec "$py" bench/pytorch/conformance.py --dtr bazel-bin/cli/dtr "$@"
