#!/usr/bin/env bash
# Runs one test executable under mpirun. Usage: mpi_run.sh RANKS BINARY [ARGS...]
set -u
# The MPI launcher: Open MPI's by default; --config=mpich sets DTR_MPIRUN=mpirun.mpich.
read -r -a mpirun <<<"${DTR_MPIRUN:-mpirun --oversubscribe}"
n=$1
shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
# A hang must fail the test, not stall CI: 120 s is ample for most tests run this way; a
# target that needs longer sets DTR_MPI_TIMEOUT_S in its env.
exec timeout "${DTR_MPI_TIMEOUT_S:-120}" "${mpirun[@]}" -n "$n" "$@"
