#!/usr/bin/env bash
# dtr.torch.redistribute against DTensor.redistribute under torchrun (bench/pytorch/
# dtensor_bench.py), in the PyTorch environment (bench/pytorch/venv.sh) with the package
# installed from python/, a core per rank where the machine has them. Prints the table of
# docs/python.md, "DTensor in and out".
#
#   bash bench/pytorch/dtensor_bench.sh [--ranks N] [--mib M] [--reps K]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ranks=2 args=()
while [ $# -gt 0 ]; do
    case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --mib | --reps) args+=("$1" "$2"); shift 2 ;;
    *) echo "dtensor_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
py=$(bash "$root/bench/pytorch/venv.sh")
"$(dirname "$py")/pip" install -q --force-reinstall --no-deps "$root/python" >&2
echo "bash bench/pytorch/dtensor_bench.sh --ranks $ranks ${args[*]} on $(date -u +%Y-%m-%d), $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p'), $("$py" -c 'import torch; print("torch", torch.__version__)')"
cd /tmp
# one thread a rank (torch's intra-op pool would take every core in each process)
OMP_NUM_THREADS=1 "$(dirname "$py")/torchrun" --nproc-per-node "$ranks" \
    "$root/bench/pytorch/dtensor_bench.py" "${args[@]}" 2>&1 | grep -vE '^(\[rank[0-9]+\]:)?W[0-9]'
