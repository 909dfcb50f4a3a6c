#!/usr/bin/env bash
# The speed comparison against PyTorch DTensor (see speed.py); about 10 minutes.
# Usage: bash bench/pytorch/speed.sh [--rounds R] [--sizes 1,16,128] [--json F]
set -eu
cd "$(dirname "$0")/../.."
py=$(bash bench/pytorch/venv.sh)
bazel build -c opt //cli:dtr //bench:plan_bench >/dev/null 2>&1 ||
    { echo "speed.sh: bazel build failed" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
exec "$py" bench/pytorch/speed.py --dtr bazel-bin/cli/dtr --plan-bench bazel-bin/bench/plan_bench "$@"
