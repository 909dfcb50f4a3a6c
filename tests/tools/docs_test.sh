#!/usr/bin/env bash
# The docs test themselves (tests/tools/docs_test.py: shown commands run and their output
# compared, JSON samples against docs/json.md, cited paths, dated figures), then the test
# tested: a copy of README.md with one shown output line edited, one cited path misspelt and
# one --json sample missing its schema must fail, each named.
# Usage: docs_test.sh DTR   (from the checkout; tools/test.sh's part `docs`)
set -u
cd "$(dirname "$0")/../.."
dtr=$1
pass=0 fail=0
out=$(python3 tests/tools/docs_test.py . "$dtr" 2>&1)
rc=$?
echo "$out" | grep -E '^FAIL|^docs:'
line=$(grep -oE '^docs: [0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -1)
read -r p f < <(sed -E 's/docs: ([0-9]+) passed, ([0-9]+) failed/\1 \2/' <<<"${line:-docs: 0 passed, 1 failed}")
pass=$((pass + p))
fail=$((fail + f))
[ "$rc" -eq 0 ] || [ "$f" -gt 0 ] || fail=$((fail + 1))

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -e 's/^40 bytes held over 4 ranks; the tensor is 40 bytes$/41 bytes held over 4 ranks; the tensor is 40 bytes/' \
    -e 's|`tools/install.sh`|`tools/install_typo.sh`|' \
    -e 's|object: `{"schema":1,"command":"layout",|object: `{"command":"layout",|' README.md >"$tmp/README.md"
bad=$(python3 tests/tools/docs_test.py . "$dtr" "$tmp/README.md" 2>&1)
brc=$?
for want in "shown '41 bytes held over 4 ranks; the tensor is 40 bytes', printed '40 bytes held" \
    "'tools/install_typo.sh' does not exist" \
    'a --json sample without "schema": 1 first'; do
    if [ "$brc" -eq 1 ] && grep -qF -- "$want" <<<"$bad"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: an edited README.md is not caught: want '$want' (exit $brc)"
        echo "$bad" | tail -5
    fi
done
echo "docs test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
