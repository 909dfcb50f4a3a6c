#!/usr/bin/env bash
# Runs mpi_layout_test under mpirun for several world sizes and specs.
# Usage: mpi_layout_test.sh BINARY
set -u
# The MPI launcher: Open MPI's by default; --config=mpich sets DTR_MPIRUN=mpirun.mpich.
read -r -a mpirun <<<"${DTR_MPIRUN:-mpirun --oversubscribe}"
bin=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Loopback only: no probing of other interfaces inside the sandbox.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
pass=0
fail=0
run() {
    local n=$1
    shift
    if "${mpirun[@]}" -n "$n" "$bin" "$@"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: mpirun -n $n mpi_layout_test $*"
    fi
}
run 4 2x2 7x5 'S(0),S(1)'
run 4 2x2 2x5 'S(1),S(1)'
run 4 4 5x3 'S(0)'
run 5 2x2 9 'S(0),S(0)'       # rank 0 of 5 is outside the mesh
run 8 2x2x2 6x7x3 'S(2),P(sum),S(0)'
run 8 2x4 3x17 'R,S(1)'
echo "mpi layout runs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
