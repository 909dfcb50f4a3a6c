#!/usr/bin/env bash
# Installs the Debian packages dtr builds and tests with. Idempotent: prints nothing and
# touches nothing when they are all present. Needs root (or sudo) only when something is
# missing. CUDA/NCCL are optional and not installed here: the build detects them.
set -euo pipefail

packages=(
    bazel-bootstrap    # Bazel 4.2.3, offline (WORKSPACE mode)
    bazel-rules-java   # @rules_java, which Bazel's own toolchains load
    build-essential    # gcc
    openmpi-bin        # mpirun
    libopenmpi-dev     # mpi.h, libmpi
    mpich              # mpirun.mpich: the MPICH build and its tests (--config=mpich)
    libmpich-dev       # MPICH's mpi.h, libmpich
    cmake              # the installed CMake package, tested from outside (tests/install)
    pkgconf            # pkg-config, likewise
    python3            # tools/install.sh writes the installed headers with it
    help2man           # tools/man.sh: the installed man page dtr.1, from the CLI's help
    man-db             # `man dtr` from an installed tree (tests/install/run.sh)
    libcriterion-dev   # single-process unit tests
    libgloo-dev        # the Gloo backend and its tests (no MPI: tools/dtr_launch.sh)
    libjansson-dev     # the JSON parser of checkpoint headers (checkpoint/)
    libxxhash-dev      # XXH3, the checksum of each piece of a saved checkpoint
    clang-14           # the libFuzzer harnesses (fuzz/run.sh)
    libclang-rt-14-dev # libFuzzer and the sanitizer runtimes for clang
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "dtr setup: installing ${missing[*]}" >&2
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "dtr setup: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq >/dev/null
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "dtr setup: done" >&2
