#!/usr/bin/env bash
# The long fuzz run (not part of CI): at least 10 million executions in all, per-harness
# figures go in docs/reliability.md (the long-run table) from what this prints.
#   bash fuzz/long.sh            # parse 4M, layout 4M, plan 2M executions
#   RUNS_SCALE=2 bash fuzz/long.sh   # twice as many
set -uo pipefail
cd "$(dirname "$0")/.."
scale=${RUNS_SCALE:-1}
rc=0
for spec in parse:4000000 layout:4000000 plan:2000000; do
    h=${spec%%:*}
    n=$((${spec#*:} * scale))
    bash fuzz/run.sh --only "$h" --runs "$n" || rc=1
done
exit $rc
