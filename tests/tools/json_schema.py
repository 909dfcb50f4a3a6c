#!/usr/bin/env python3
"""Checks the CLI's JSON against the one table of docs/json.md.

usage: json_schema.py TABLE.md OUTPUT...   (each OUTPUT a file of one JSON object per line,
                                            named COMMAND.anything: layout.1, run.cross, ...)

Every object: "schema" 1, "command" the file's command, "mesh" an array of ints; every key at
any depth is in the table with the table's type. Prints each violation and a summary
("json: N passed, N failed"); the table's keys that no output printed are listed, not failed.
"""
import json
import os
import re
import sys

ROW = re.compile(r"^\|\s*`([a-z_0-9]+)`\s*\|\s*([^|]+?)\s*\|")


def read_table(path):
    types = {}
    for line in open(path, encoding="utf-8"):
        m = ROW.match(line)
        if m:
            if m.group(1) in types:
                raise SystemExit(f"json_schema.py: {path}: key {m.group(1)} listed twice")
            types[m.group(1)] = m.group(2).strip()
    return types


def fits(value, kind):
    """Whether value has the table's type `kind`."""
    if kind.endswith(" or null"):
        return value is None or fits(value, kind[: -len(" or null")])
    if kind.startswith("array of "):
        return isinstance(value, list) and all(fits(v, kind[len("array of "):]) for v in value)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    raise SystemExit(f"json_schema.py: unknown type '{kind}' in the table")


def walk(obj, types, where, errors, seen):
    if isinstance(obj, list):
        for v in obj:
            walk(v, types, where, errors, seen)
        return
    if not isinstance(obj, dict):
        return
    for key, value in obj.items():
        seen.add(key)
        if key not in types:
            errors.append(f"{where}: key '{key}' is not in docs/json.md")
        elif not fits(value, types[key]):
            errors.append(f"{where}: '{key}' is {json.dumps(value)[:80]}, the table says {types[key]}")
        walk(value, types, where, errors, seen)


def main(argv):
    types = read_table(argv[1])
    passed, errors, seen = 0, [], set()
    for path in argv[2:]:
        command = os.path.basename(path).split(".")[0]
        lines = [l for l in open(path, encoding="utf-8").read().splitlines() if l.strip()]
        if len(lines) != 1:
            errors.append(f"{path}: {len(lines)} lines, want one JSON object")
            continue
        try:
            obj = json.loads(lines[0])
        except json.JSONDecodeError as e:
            errors.append(f"{path}: not JSON: {e}")
            continue
        before = len(errors)
        if not isinstance(obj, dict):
            errors.append(f"{path}: not a JSON object")
            continue
        if obj.get("schema") != 1:
            errors.append(f"{path}: schema {obj.get('schema')!r}, want 1")
        if obj.get("command") != command:
            errors.append(f"{path}: command {obj.get('command')!r}, want {command!r}")
        if not fits(obj.get("mesh"), "array of int") or not obj.get("mesh"):
            errors.append(f"{path}: no mesh sizes")
        if list(obj)[:3] != ["schema", "command", "mesh"]:
            errors.append(f"{path}: starts with {list(obj)[:3]}, want schema, command, mesh")
        walk(obj, types, path, errors, seen)
        passed += len(errors) == before
    for e in errors:
        print("FAIL:", e)
    unseen = sorted(set(types) - seen)
    if unseen:
        print(f"json: keys of the table no output printed here: {', '.join(unseen)}")
    print(f"json: {len(types)} keys in the table; {passed} passed, {len(argv) - 2 - passed} failed")
    return 0 if passed == len(argv) - 2 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
