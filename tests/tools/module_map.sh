#!/usr/bin/env bash
# The module map (tests/tools/module_map.py) on the tree, then on copies of docs/design.md that
# drop a row or name a folder no library links, where it must fail naming the folder.
# Usage: module_map.sh MODULE_MAP_PY
set -u
py=$1
root=$(dirname "$py")/../..
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }
if out=$(python3 "$py" "$root"); then ok "the tree: ${out##*$'\n'}"; else bad "the tree:"$'\n'"$out"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# expect_fail NAME PATTERN SED: design.md edited by SED must fail with a line matching PATTERN
expect_fail() {
    sed -E "$3" "$root/docs/design.md" >"$work/design.md"
    local out
    out=$(python3 "$py" "$root" --design "$work/design.md")
    if [ $? -eq 1 ] && grep -q -- "$2" <<<"$out"; then ok "$1: $(grep -m1 -- "$2" <<<"$out")"; else bad "$1: $out"; fi
}
expect_fail "a row dropped" "the linked \['checkpoint'\] are not in the table" '/^\| `checkpoint\/` \|/d'
expect_fail "a folder no library links" "folders \['nowhere'\] are not linked" \
    's/^\| `placement\/` \|/| `nowhere\/` | x | |\n| `placement\/` |/'
echo "module map test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
