# Sourced by the benchmark scripts run from the checkout's root: the dtr binary (built
# first, optimised), Open MPI's settings as root on this machine, and `field KEY JSON`, a
# flat field of dtr run's one-line JSON.
dtr=$(pwd)/bazel-bin/cli/dtr
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
field() { grep -oE "\"$1\":[^,}]*" <<<"$2" | head -1 | cut -d: -f2 | tr -d '"'; }

# exec_bench's rows (also ab_bench.sh's): FROM|TO of each transition; the mesh for N ranks
# (a 2-d change: 2x2 on 4 ranks, on 2 ranks 1x2, where only the S(1) gather moves data); and
# the iterations for a size in MiB (fewer for the large ones).
exec_specs='S(0)|R P|R P|S(0) S(0)|S(1) S(1)|R S(0),S(1)|R,R'
exec_mesh() { if [[ $2 != *,* ]]; then echo "$1"; elif [ "$1" -eq 4 ]; then echo 2x2; else echo 1x2; fi; }
exec_iters() { if [ "$1" -ge 256 ]; then echo 5; elif [ "$1" -ge 64 ]; then echo 10; else echo 20; fi; }
