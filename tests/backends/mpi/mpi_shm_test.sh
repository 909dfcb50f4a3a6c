#!/usr/bin/env bash
# The strided all-to-all and all-gather of the MPI backend under mpirun: mpi_shm_test on 2,
# 3, 4 and 8 ranks with the shared-memory path's default chunks, with tiny ones, with MPI's
# strided gather (DTR_MPI_SHM_GATHER=0), with MPI_Alltoallw (DTR_MPI_SHM=0) and with the send
# buffers in a shared allocation (--shared); then `dtr run --verify` redistributions that take
# them, also on shared buffers (--buffers shared).
# Usage: mpi_shm_test.sh MPI_SHM_TEST DTR   (DTR_SEED overrides the seed)
set -u
bin=$1
dtr=$2
seed=${DTR_SEED:-20261121}
name=mpi_shm_test
source "$(dirname "$0")/shm_lib.sh"

run - 2 150
run - 3 100
run - 4 100
run - 8 40
run DTR_MPI_SHM_CHUNK=40 2 80
run DTR_MPI_SHM_CHUNK=40 4 60
run DTR_MPI_SHM_CHUNK=4096 3 80
run DTR_MPI_SHM_GATHER=0 3 60
run DTR_MPI_SHM=0 4 100
# send buffers in a shared allocation: the all-to-alls read them where they are (the ring
# form where a case puts one member's on the heap)
run - 2 100 --shared
run - 4 60 --shared
run DTR_MPI_SHM_CHUNK=40 3 60 --shared
run - 8 20 --shared

check DTR_MPI_SHM_CHUNK=40 4 all_to_all --mesh 4 --shape 64x48 --dtype f16 \
    --from 'S(0)' --to 'S(1)'
check DTR_MPI_SHM_CHUNK=40 4 all_to_all --mesh 4 --shape 48x64 --dtype f64 \
    --from 'S(1)' --to 'S(0)'
check DTR_MPI_SHM_CHUNK=24 8 all_to_all --mesh 8 --shape 16x8x24 --dtype i32 \
    --from 'S(2)' --to 'S(0)'
check DTR_MPI_SHM_CHUNK=40 4 all_to_all --mesh 2x2 --shape 16x8x12 --dtype bf16 \
    --from 'S(0),S(1)' --to 'S(0),S(2)'
check DTR_MPI_SHM_CHUNK=40 4 all_to_all --mesh 2x2 --shape 16x8x12 --dtype f8e4m3 \
    --from 'S(1),S(0)' --to 'S(2),S(0)'
check - 2 all_to_all --mesh 2 --shape 2048x512 --dtype f32 --from 'S(1)' --to 'S(0)'
check - 4 all_to_all --mesh 4 --shape 1024x1000 --dtype u8 --from 'S(0)' --to 'S(1)'
# gathers of a non-leading dim with even pieces, in place (the large ones with streaming
# stores); uneven ones in slices, through MPI_Allgatherv (3 ranks, 1100 columns)
check DTR_MPI_SHM_CHUNK=40 4 all_gather --mesh 4 --shape 24x64 --dtype f16 --from 'S(1)' --to 'R'
check DTR_MPI_SHM_CHUNK=24 3 all_gather --mesh 3 --shape 6x9x30 --dtype f64 \
    --from 'S(2)' --to 'R'
check DTR_MPI_SHM_CHUNK=40 4 all_gather --mesh 2x2 --shape 16x8x12 --dtype u8 \
    --from 'S(1),S(2)' --to 'R,R'
check - 4 all_gather --mesh 4 --shape 2048x1028 --dtype f32 --from 'S(1)' --to 'R'
check - 3 all_gather --mesh 3 --shape 1024x3000 --dtype bf16 --from 'S(1)' --to 'R'
check - 2 all_gather --mesh 2 --shape 4096x1024 --dtype f32 --from 'S(1)' --to 'R'
check - 3 all_gather --mesh 3 --shape 2048x1100 --dtype f32 --from 'S(1)' --to 'R'

# dtr run's blocks in a shared allocation: on one node its all-to-alls read the others'
# where they are (the line that counts them); over simulated nodes the groups use MPI
direct="shared buffers where they are"
case ${DTR_MPIRUN:-} in *mpirun_nodes*) direct=verified ;; esac
check - 2 "$direct" --mesh 2 --shape 64x48 --dtype f32 --from 'S(0)' --to 'S(1)' --buffers shared --fill random
check - 4 "$direct" --mesh 4 --shape 48x64 --dtype f16 --from 'S(1)' --to 'S(0)' --buffers shared --fill random --nonblocking
check - 4 "$direct" --mesh 2x2 --shape 16x8x12 --dtype bf16 --from 'S(0),S(1)' --to 'S(0),S(2)' --buffers shared --fill random
check - 2 "$direct" --mesh 2 --shape 2048x512 --dtype f32 --from 'S(1)' --to 'S(0)' --buffers shared

echo "strided all-to-all and gather, all runs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
