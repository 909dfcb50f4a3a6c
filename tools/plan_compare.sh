#!/usr/bin/env bash
# Compares `dtr plan --json` of this tree with another commit's on random changes: every
# plan (steps, bytes, modeled time, chosen candidate, lower bound) and every refusal must be
# the same. For planner changes meant to leave plans alone (issue 26: the class-based figures).
#
#   tools/plan_compare.sh [--base REV] [--cases N] [--seed S] [--big]
#
#   --base REV   the commit to compare against (default HEAD~1)
#   --cases N    random changes (default 3000): meshes of 1-4 dims with sizes 1-6 (at most
#                512 ranks), 1-3 tensor dims, even shapes in three cases of four, Shard /
#                Replicate / Partial(sum|max) placements, a balanced reduction (P -> S(d)
#                under later shards of d) in one case of four, shard orders in one of the
#                rest, both strategies
#   --big        also 8 changes on meshes of 4,096 ranks (slow on commits that visit every
#                rank: minutes)
#
# Builds REV's dtr in a git worktree under ${TMPDIR:-/tmp} (its own Bazel output base, the
# offline dependencies of tools/setup.sh). Exits 1 on the first difference, printing it.
set -euo pipefail

base=HEAD~1 cases=3000 seed=1 big=0
while [ $# -gt 0 ]; do
  case "$1" in
    --base) base=${2:?--base needs a commit}; shift 2 ;;
    --cases) cases=${2:?--cases needs a number}; shift 2 ;;
    --seed) seed=${2:?--seed needs a number}; shift 2 ;;
    --big) big=1; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "plan_compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$cases" in ''|*[!0-9]*) echo "plan_compare.sh: --cases must be a number, not '$cases'" >&2; exit 2 ;; esac

root=$(git rev-parse --show-toplevel)
cd "$root"
rev=$(git rev-parse --verify "$base^{commit}" 2>/dev/null) ||
  { echo "plan_compare.sh: --base '$base' is not a commit here" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/plan_compare.XXXXXX")
trap 'git worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add --detach "$work/base" "$rev" >/dev/null 2>&1
echo "plan_compare: this tree against $(git log -1 --format='%h %s' "$rev")"
(cd "$work/base" && bazel build -c opt //tools:dtr >/dev/null 2>&1) ||
  { echo "plan_compare.sh: building $rev's dtr failed" >&2; exit 1; }
bazel build -c opt //tools:dtr >/dev/null 2>&1 || { echo "plan_compare.sh: building dtr failed" >&2; exit 1; }
cp "$work/base/bazel-bin/tools/dtr" "$work/dtr_base"
cp bazel-bin/tools/dtr "$work/dtr_new"

python3 - "$work/dtr_base" "$work/dtr_new" "$cases" "$seed" "$big" <<'EOF'
import random, subprocess, sys
old, new, cases, seed, big = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
rng = random.Random(seed)

def placement(ndim, op):
    k = rng.randrange(ndim + 2)
    return f"S({k})" if k < ndim else ("R" if k == ndim else f"P({op})")

def orders(pl):
    """Random shard orders on tensor dims that several mesh dims shard."""
    out = list(pl)
    for d in range(8):
        idx = [i for i, p in enumerate(pl) if p == f"S({d})"]
        if len(idx) < 2:
            continue
        perm = list(range(len(idx)))
        rng.shuffle(perm)
        for i, o in zip(idx, perm):
            out[i] = f"S({d})[{o}]"
    return out

def change(mesh, ndim, even):
    ranks = 1
    for m in mesh:
        ranks *= m
    shape = [ranks * rng.randint(1, 3) if even else rng.randint(1, 2 * ranks) for _ in range(ndim)]
    op = rng.choice(["sum", "max"])
    src = [placement(ndim, op) for _ in mesh]
    dst = [placement(ndim, op) for _ in mesh]
    dst = [d if not d.startswith("P") or s.startswith("P") else "R" for s, d in zip(src, dst)]
    if len(mesh) >= 2 and rng.randrange(4) == 0:
        # the balanced reduction: P -> S(d) on one mesh dim under later shards of d
        i, d = rng.randrange(len(mesh) - 1), rng.randrange(ndim)
        dst = list(src)
        src[i], dst[i] = f"P({op})", f"S({d})"
        for j in range(i + 1, len(mesh)):
            if rng.randrange(2):
                src[j] = dst[j] = f"S({d})"
    elif rng.randrange(4) == 0:
        src, dst = orders(src), orders(dst)
    return ["--mesh", "x".join(map(str, mesh)), "--shape", "x".join(map(str, shape)),
            "--from", ",".join(src), "--to", ",".join(dst)]

def run(binary, args):
    p = subprocess.run([binary, "plan", *args, "--json"], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr

todo = []
for _ in range(cases):
    dims = rng.randint(1, 4)
    mesh = [rng.randint(1, 6 if dims <= 2 else 4 if dims == 3 else 3) for _ in range(dims)]
    todo.append(change(mesh, rng.randint(1, 3), rng.randrange(4) != 0))
if big:
    for mesh in ([16, 16, 16], [64, 64], [4, 4, 4, 4, 4, 4], [8, 8, 8, 8]):
        for _ in range(2):
            todo.append(change(mesh, 2, True))
same = planned = 0
for args in todo:
    for strategy in ("optimal", "compat"):
        a = run(old, args + ["--strategy", strategy])
        b = run(new, args + ["--strategy", strategy])
        if a[0] != b[0] or a[1] != b[1]:
            print("plan_compare: DIFFERENT for dtr plan " + " ".join(f"'{x}'" for x in args) + f" --strategy {strategy}")
            print(f"  base ({a[0]}): {a[1].strip() or a[2].strip()}")
            print(f"  this ({b[0]}): {b[1].strip() or b[2].strip()}")
            sys.exit(1)
        same += 1
        planned += a[0] == 0
print(f"plan_compare: {same} plans identical ({planned} planned, {same - planned} refused alike) "
      f"over {len(todo)} changes, seed {seed}")
EOF
