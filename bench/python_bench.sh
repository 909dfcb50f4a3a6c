#!/usr/bin/env bash
# The Python binding's benchmark: bench/python_bench.py on 2 ranks (a core each) in the
# PyTorch environment (bench/pytorch/venv.sh), with the package installed from python/.
# Prints the tables of docs/python.md, "Benchmark".
#
#   bash bench/python_bench.sh [--ranks N] [--quick]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ranks=2 args=()
while [ $# -gt 0 ]; do
    case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --quick) args+=(--quick); shift ;;
    *) echo "python_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
py=$(bash "$root/bench/pytorch/venv.sh")
"$(dirname "$py")/pip" install -q mpi4py >&2
"$(dirname "$py")/pip" install -q --force-reinstall --no-deps "$root/python" >&2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "bash bench/python_bench.sh --ranks $ranks on $(date -u +%Y-%m-%d), $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p')"
cd /tmp
bind=(--bind-to core)
[ "$ranks" -le "$(nproc)" ] || bind=(--bind-to none) # (more ranks than cores: the scheduler's)
mpirun --oversubscribe -n "$ranks" "${bind[@]}" "$py" "$root/bench/python_bench.py" "${args[@]}"
