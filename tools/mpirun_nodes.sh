#!/usr/bin/env bash
# Runs an MPI program over several simulated nodes on this machine: each node a UTS namespace
# with a host name of its own (node0, node1, ...), its ranks sharing memory, ranks of
# different nodes talking TCP over loopback (docs/nodes.md, "Simulated nodes"; "Several nodes on one
# machine"). Ranks fill node0 first, then node1, ...: -n 8 on 2 nodes is 2 x 4.
#
# Usage: tools/mpirun_nodes.sh [--nodes N] [--per-node M] -n RANKS [MPIRUN ARGS...] PROGRAM [ARGS...]
#   --nodes N      simulated nodes (default $DTR_NODES, else 2)
#   --per-node M   ranks per node (default RANKS / N, rounded up)
#   -n RANKS       ranks in all (as mpirun's -n; -np is taken too)
# Everything else goes to mpirun unchanged. Open MPI only (Debian's mpirun, or $DTR_NODES_MPIRUN).
#
# As the multi-rank tests' launcher (they take it from DTR_MPIRUN):
#   bazel test --test_env="DTR_MPIRUN=$PWD/tools/mpirun_nodes.sh --nodes 2" //tests/...
# and `dtr run` over 2 nodes x 2 ranks:
#   tools/mpirun_nodes.sh --nodes 2 -n 4 bazel-bin/cli/dtr run --verify --mesh 2x2 ...
# Needs root (or CAP_SYS_ADMIN) for unshare -u; the launcher and host file are written once
# under ${TMPDIR:-/tmp}/dtr-nodes-$UID and reused.
set -u
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
die() {
    echo "mpirun_nodes.sh: $*" >&2
    exit 2
}

nodes=${DTR_NODES:-2}
per_node=
ranks=
args=()
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --nodes) [ $# -ge 2 ] || die "--nodes needs a count"; nodes=$2; shift 2 ;;
    --nodes=*) nodes=${1#*=}; shift ;;
    --per-node) [ $# -ge 2 ] || die "--per-node needs a count"; per_node=$2; shift 2 ;;
    --per-node=*) per_node=${1#*=}; shift ;;
    -n | -np) [ $# -ge 2 ] || die "$1 needs a rank count"; ranks=$2; shift 2 ;;
    *) args=("$@"); break ;;
    esac
done
[[ "$nodes" =~ ^[1-9][0-9]*$ ]] && [ "$nodes" -le 64 ] ||
    die "--nodes: '$nodes' is not a count from 1 to 64"
[ -n "$ranks" ] || die "-n RANKS is missing (ranks in all)"
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || die "-n: '$ranks' is not a positive count"
[ ${#args[@]} -gt 0 ] || die "no program to run (see --help)"
if [ -z "$per_node" ]; then
    per_node=$(((ranks + nodes - 1) / nodes))
fi
[[ "$per_node" =~ ^[1-9][0-9]*$ ]] || die "--per-node: '$per_node' is not a positive count"
[ $((per_node * nodes)) -ge "$ranks" ] ||
    die "$ranks ranks do not fit on $nodes nodes of $per_node"
command -v unshare >/dev/null || die "unshare (util-linux) is not installed"
read -r -a mpirun <<<"${DTR_NODES_MPIRUN:-mpirun}"
"${mpirun[0]}" --version 2>&1 | grep -q "Open MPI" ||
    die "${mpirun[0]} is not Open MPI's mpirun (simulated nodes need its rsh launcher agent)"

# The launcher stands in for ssh: it drops mpirun's options and starts the daemon under the
# node's host name. Written to a temporary name and moved, so concurrent runs share it.
dir=${TMPDIR:-/tmp}/dtr-nodes-$(id -u)
mkdir -p "$dir" || die "cannot make $dir"
launcher=$dir/launcher
if [ ! -x "$launcher" ]; then
    tmp=$(mktemp "$dir/launcher.XXXXXX") || die "cannot write in $dir"
    cat >"$tmp" <<'EOF'
#!/bin/bash
while [[ "$1" == -* ]]; do shift; done
host=$1
shift
exec unshare -u /bin/bash -c "hostname $host; exec $*"
EOF
    chmod +x "$tmp" && mv -f "$tmp" "$launcher"
fi
hosts=$dir/hosts-$nodes-$per_node
if [ ! -f "$hosts" ]; then
    tmp=$(mktemp "$dir/hosts.XXXXXX") || die "cannot write in $dir"
    for ((k = 0; k < nodes; k++)); do echo "node$k slots=$per_node"; done >"$tmp"
    mv -f "$tmp" "$hosts"
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec "${mpirun[@]}" --hostfile "$hosts" -n "$ranks" --mca plm_rsh_agent "$launcher" \
    --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo --mca btl self,vader,tcp \
    "${args[@]}"
