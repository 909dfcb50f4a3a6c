#!/usr/bin/env bash
# man.sh: writes the dtr(1) man page from the CLI's own help, so that the page says what the
# program does: help2man (Debian's help2man) makes the page around `dtr --version`, with
# `dtr --help` as its description and each command's `dtr COMMAND --help` as a section of
# its own, verbatim.
# Usage: bash tools/man.sh DTR_BINARY OUT.1   (tools/install.sh runs it on the installed CLI)
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: bash tools/man.sh DTR_BINARY OUT.1" >&2; exit 2; }
dtr=$1 out=$2
command -v help2man >/dev/null || { echo "man.sh: help2man is missing (tools/setup.sh installs it)" >&2; exit 1; }
[ -x "$dtr" ] || { echo "man.sh: '$dtr' is not an executable" >&2; exit 2; }
inc=$(mktemp)
trap 'rm -f "$inc"' EXIT
# roff: a backslash is \e; a line that starts with . or ' is a request unless escaped.
roff() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
{
    printf '[DESCRIPTION]\n.nf\n'
    "$dtr" --help | roff
    printf '.fi\n'
    # the commands the top-level help lists, in its order
    for cmd in $("$dtr" --help | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && NF {print $1}'); do
        printf '[COMMAND: DTR %s]\n.nf\n' "$(tr '[:lower:]' '[:upper:]' <<<"$cmd")"
        "$dtr" "$cmd" --help | roff
        printf '.fi\n'
    done
    printf '[SEE ALSO]\nThe documents installed in share/doc/dtr (README.md, integration.md, semantics.md),\nand the library'"'"'s headers <dtr/dtr.h> and <dtr/dtr_core.h>.\n'
} >"$inc"
help2man --no-info --section 1 --name 'DTensor placement and redistribution' \
    --include "$inc" --output "$out" "$dtr"
