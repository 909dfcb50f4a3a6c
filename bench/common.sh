# Sourced by the benchmark scripts run from the checkout's root: the dtr binary (built
# first, optimised), Open MPI's settings as root on this machine, and `field KEY JSON`, a
# flat field of dtr run's one-line JSON.
dtr=$(pwd)/bazel-bin/tools/dtr
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
field() { grep -oE "\"$1\":[^,}]*" <<<"$2" | head -1 | cut -d: -f2 | tr -d '"'; }
