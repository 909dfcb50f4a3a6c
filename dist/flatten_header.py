#!/usr/bin/env python3
"""Writes an installed header: ROOT with every quoted include inlined once, in order.

usage: flatten_header.py OUT ROOT [--dir DIR]... [--as NAME=HEADER]...

The source tree's public headers include each other by their path in the tree
("redistribute/executor/executor.h"); installed, the API is one file, <dtr/dtr.h>, beside the backends'
headers. Each quoted include is looked up in the DIRs (the checkout, bazel-bin for generated
headers) and inlined the first time it is seen, guards and all; system includes are kept.
--as NAME=HEADER replaces an include of HEADER, and of everything HEADER itself includes,
by `#include "NAME"` (a backend's header includes "dtr.h" instead of the modules it uses).
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main(argv):
    out, root, rest = argv[1], argv[2], argv[3:]
    dirs, aliases = [], []
    while rest:
        flag, value, rest = rest[0], rest[1], rest[2:]
        if flag == "--dir":
            dirs.append(value)
        elif flag == "--as":
            name, header = value.split("=", 1)
            aliases.append((name, header))
        else:
            sys.exit("flatten_header.py: unknown option " + flag)

    def find(path):
        for d in dirs:
            p = os.path.join(d, path)
            if os.path.isfile(p):
                return p
        sys.exit("flatten_header.py: %s: not found in %s" % (path, ", ".join(dirs)))

    def closure(path, acc):
        if path in acc:
            return
        acc.add(path)
        for line in open(find(path)):
            m = INCLUDE.match(line)
            if m:
                closure(m.group(1), acc)

    replaced = {}
    for name, header in aliases:
        acc = set()
        closure(header, acc)
        for h in acc:
            replaced[h] = name

    seen, emitted, lines = set(), set(), []

    def emit(path):
        for line in open(find(path)):
            m = INCLUDE.match(line)
            if not m:
                lines.append(line)
                continue
            inc = m.group(1)
            if inc in replaced:
                if replaced[inc] not in emitted:
                    emitted.add(replaced[inc])
                    lines.append('#include "%s"\n' % replaced[inc])
            elif inc not in seen:
                seen.add(inc)
                emit(inc)

    seen.add(root)
    emit(root)
    with open(out, "w") as f:
        f.write("/* Installed by tools/install.sh from dtr's source tree "
                "(dist/flatten_header.py). */\n")
        f.writelines(lines)


if __name__ == "__main__":
    main(sys.argv)
