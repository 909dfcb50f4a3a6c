#!/usr/bin/env python3
"""The module map, kept in four places, checked against the Bazel targets the libraries are
linked from (dist/BUILD: DTR_MODULES and the companion libraries' deps): docs/design.md's
table ("Where the code lives"), the layout rules (tests/tools/layout_rules.py's INCLUDES),
the folders' BUILD files, and dtr.h's comment.

usage: module_map.py ROOT [--design FILE]   (FILE: another design.md, for the self-test)
Checks that the table's library folders are exactly the folders the libraries link, and
that each has a row in the layout rules; that
each has a BUILD file with a cc_library and holds the public headers the table names; that
every header dtr.h includes is a public header of the table and named in dtr.h's comment;
and that every backend's header (backends/*/dtr_*.h) is named in dtr.h's comment as
<dtr/dtr_NAME.h>. Prints each mismatch and ends with "module map: N passed, N failed".
"""
import ast
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1])
DESIGN = os.path.join(ROOT, "docs", "design.md")
if "--design" in sys.argv:
    DESIGN = sys.argv[sys.argv.index("--design") + 1]
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}")


def design_table():
    """{folder: [public header paths]} from the table under '## Where the code lives'."""
    text = open(DESIGN).read()
    section = text.split("## Where the code lives", 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        first = names[0].rstrip("/")
        parent = os.path.dirname(first)
        folders = [first] + [os.path.join(parent, n.rstrip("/")) for n in names[1:]]
        headers = re.findall(r"`([^`]+\.h)`", cells[2])
        for f in folders:
            # a header named alone lives in the folder of the row it belongs to: the one
            # whose folder holds it (a row of several folders names one header each)
            out[f] = [h if "/" in h else os.path.join(f, h) for h in headers
                      if os.path.exists(os.path.join(ROOT, f, os.path.basename(h))) or "/" in h]
    return out


def layout_folders():
    """Every folder of the layout rules."""
    tree = ast.parse(open(os.path.join(ROOT, "tests", "tools", "layout_rules.py")).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "INCLUDES" for t in node.targets):
            return {k.value for k in node.value.keys}
    return set()


def linked_folders():
    """The packages of the targets libdtr (DTR_MODULES) and its companion libraries link."""
    text = open(os.path.join(ROOT, "dist", "BUILD")).read()
    labels = re.findall(r'"//([a-z_/]*)(?::[a-z_]+)?"', text)
    return {p for p in labels if p and p != "dist" and os.path.exists(os.path.join(ROOT, p, "BUILD"))}


table = design_table()
library = {f for f in table if not f.startswith(("tests", "tools", "cli", "pattern"))}
linked = linked_folders()
rules = layout_folders()
check(library == linked, f"docs/design.md's folders {sorted(library - linked)} are not linked "
      f"into a library (dist/BUILD); the linked {sorted(linked - library)} are not in the table")
check(linked <= rules, f"the linked folders {sorted(linked - rules)} have no row in the layout "
      "rules")
for folder in sorted(library):
    build = os.path.join(ROOT, folder, "BUILD")
    check(os.path.exists(build) and "cc_library(" in open(build).read(),
          f"{folder}/: no BUILD file with a cc_library")
    for h in table[folder]:
        check(os.path.exists(os.path.join(ROOT, h)), f"{folder}/: public header {h} is missing")

dtr_h = open(os.path.join(ROOT, "dtr.h")).read()
comment = dtr_h.split("*/", 1)[0]
public = {h for hs in table.values() for h in hs}
for inc in re.findall(r'^#include "([^"]+)"', dtr_h, re.M):
    if inc in ("dtr_version.h", "core/version.h"):
        continue
    check(inc in public, f"dtr.h includes {inc}, which docs/design.md's table does not name")
    check(inc in comment, f"dtr.h includes {inc}, which its comment's module list does not name")
for folder in sorted(f for f in library if f.startswith("backends/")):
    for h in os.listdir(os.path.join(ROOT, folder)):
        if re.fullmatch(r"dtr_[a-z]+\.h", h):
            check(f"<dtr/{h}>" in comment, f"dtr.h's comment does not name <dtr/{h}> ({folder}/)")

print(f"module map: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
