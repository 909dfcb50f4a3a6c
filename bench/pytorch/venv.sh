#!/usr/bin/env bash
# Prints the path of a Python that has PyTorch, NumPy and Matplotlib, creating a virtual
# environment from PyPI on first use (about 5 GiB: PyPI's torch wheel brings its CUDA
# libraries; nothing here uses a GPU). Not part of the test suite or CI.
#
# Env: DTR_TORCH_VENV   where the environment lives (default ~/.cache/dtr/torch-venv)
#      DTR_TORCH_PIN    the torch requirement (default torch==2.15.0, the version the
#                       results in docs/results.md were measured with)
set -eu
venv=${DTR_TORCH_VENV:-$HOME/.cache/dtr/torch-venv}
pin=${DTR_TORCH_PIN:-torch==2.15.0}
if ! "$venv/bin/python" -c 'import torch, numpy, matplotlib' >/dev/null 2>&1; then
    echo "venv.sh: installing $pin, numpy and matplotlib from PyPI into $venv" >&2
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q "$pin" numpy matplotlib >&2
fi
echo "$venv/bin/python"
