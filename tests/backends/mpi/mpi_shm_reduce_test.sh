#!/usr/bin/env bash
# The MPI backend's reductions under mpirun: mpi_shm_reduce_test on 2, 3, 4, 6 and 8 ranks with
# the shared-memory path's defaults, with tiny sub-pieces and rings (every operation many
# chunks, the rings wrapping), and with MPI's calls (DTR_MPI_SHM_REDUCE=0, DTR_MPI_SHM=0);
# with every buffer in a shared allocation (--shared: read in place); then `dtr run --verify`
# redistributions whose plans reduce, also on shared buffers (--buffers shared).
# Usage: mpi_shm_reduce_test.sh MPI_SHM_REDUCE_TEST DTR   (DTR_SEED overrides the seed)
set -u
bin=$1
dtr=$2
seed=${DTR_SEED:-20261123}
name=mpi_shm_reduce_test
source "$(dirname "$0")/shm_lib.sh"

# With `few` (shm_lib.sh) the two 9 MiB all-reduces after the random cases run in five of
# the runs (each form once: the rings, tiny chunks, in place, MPI's calls, and 8 ranks, which
# the nodes part makes hierarchical), not in all: $nl is --no-large there.
nl=${few:+--no-large}
run - 2 120 $nl
run - 3 80 $nl
run - 4 80
# (over 2 or 3 simulated nodes, tools/test.sh's nodes part: 3 or 2 ranks a node, hierarchical)
run - 6 30 $nl
run - 8 30
run "DTR_MPI_SHM_CHUNK=64 DTR_MPI_SHM_RING=4096" 2 60 $nl
run "DTR_MPI_SHM_CHUNK=64 DTR_MPI_SHM_RING=4096" 4 40
run "DTR_MPI_SHM_CHUNK=1000 DTR_MPI_SHM_RING=8192" 3 40 $nl
# buffers in a shared allocation: reductions read them in place (and take the ring form
# where a case puts one member's on the heap)
run - 2 80 --shared $nl
run - 4 80 --shared
run "DTR_MPI_SHM_CHUNK=64 DTR_MPI_SHM_RING=4096" 3 40 --shared $nl
run - 8 20 --shared $nl
run DTR_MPI_SHM_REDUCE=0 4 60
run DTR_MPI_SHM=0 3 40 $nl

# every dtype through a reduce-scatter and an all-reduce; with `few` (shm_lib.sh), each dtype
# through one of them, alternating (the C runs above draw dtypes and kinds at random)
small="DTR_MPI_SHM_CHUNK=64 DTR_MPI_SHM_RING=4096"
i=0
for dtype in f32 f64 f16 bf16 i32 i64 u8; do
    i=$((i + 1))
    [ -n "$few" ] && [ $((i % 2)) -eq 0 ] ||
        check "$small" 4 reduce_scatter --mesh 4 --shape 37x19 --dtype $dtype --from 'P' --to 'S(0)'
    [ -n "$few" ] && [ $((i % 2)) -eq 1 ] ||
        check - 3 all_reduce --mesh 3 --shape 64x50 --dtype $dtype --from 'P(max)' --to 'R'
done
check "$small" 4 all_reduce --mesh 2x2 --shape 30x7 --dtype f32 --from 'P(max),P(max)' --to 'R,R'
check - 4 reduce_scatter --mesh 4 --shape 1024x1000 --dtype bf16 --from 'P' --to 'S(1)'
check - 2 all_reduce --mesh 2 --shape 2048x512 --dtype f16 --from 'P(avg)' --to 'R'
check - 8 reduce_scatter --mesh 8 --shape 100x30 --dtype f32 --from 'P(product)' --to 'S(0)'

# dtr run's blocks in a shared allocation: on one node its reductions read them in place
# (the line that counts them); over simulated nodes the groups cross nodes and use MPI
direct="shared buffers where they are"
case ${DTR_MPIRUN:-} in *mpirun_nodes*) direct=verified ;; esac
check - 4 "$direct" --mesh 4 --shape 64x1000 --dtype bf16 --from P --to 'S(0)' --buffers shared --fill random
check - 3 "$direct" --mesh 3 --shape 100x300 --dtype f32 --from 'P(avg)' --to R --buffers shared --fill random
check - 4 "$direct" --mesh 2x2 --shape 64x64 --dtype f16 --from 'P,P' --to 'S(0),R' --buffers shared --fill random --nonblocking

echo "reductions, all runs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
