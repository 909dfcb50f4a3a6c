#!/usr/bin/env bash
# `dtr layout` output, exactly: the JSON of docs/design.md's examples, the table, and help.
# Usage: cli_layout.sh DTR VERSION_HEADER (dtr_version.h, generated from version.bzl)
set -u
dtr=$1
version=$(sed -n 's/^#define DTR_VERSION_STRING "\(.*\)"$/\1/p' "$2")
pass=0
fail=0

# expect_output WANT ARGS...: exit 0 and stdout exactly WANT.
expect_output() {
    local want=$1 got rc
    shift
    got=$("$dtr" "$@" 2>&1)
    rc=$?
    if [ "$rc" -eq 0 ] && [ "$got" = "$want" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        printf 'FAIL: dtr'; printf ' %q' "$@"; printf ' (exit %s)\n' "$rc"
        diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") | sed 's/^/  /'
    fi
}

# expect_contains FRAGMENT ARGS...: exit 0 and FRAGMENT somewhere in stdout.
expect_contains() {
    local fragment=$1 got rc
    shift
    got=$("$dtr" "$@" 2>/dev/null)
    rc=$?
    if [ "$rc" -eq 0 ] && grep -qF -- "$fragment" <<<"$got"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        printf 'FAIL: dtr'; printf ' %q' "$@"; printf ' (exit %s): no "%s" in output\n' "$rc" "$fragment"
    fi
}

expect_output '{"schema":1,"command":"layout","mesh":[2,2],"shape":[2,5],"dtype":"f32","placements":["S(1)","S(1)"],"blocks":[{"rank":0,"coord":[0,0],"local_shape":[2,2],"global_offset":[0,0],"bytes":16},{"rank":1,"coord":[0,1],"local_shape":[2,1],"global_offset":[0,2],"bytes":8},{"rank":2,"coord":[1,0],"local_shape":[2,1],"global_offset":[0,3],"bytes":8},{"rank":3,"coord":[1,1],"local_shape":[2,1],"global_offset":[0,4],"bytes":8}]}' \
    layout --mesh 2x2 --shape 2x5 --placements 'S(1),S(1)' --json

expect_output '{"schema":1,"command":"layout","mesh":[2,2],"shape":[9],"dtype":"f64","placements":["S(0)","S(0)"],"blocks":[{"rank":0,"coord":[0,0],"local_shape":[3],"global_offset":[0],"bytes":24},{"rank":1,"coord":[0,1],"local_shape":[2],"global_offset":[3],"bytes":16},{"rank":2,"coord":[1,0],"local_shape":[2],"global_offset":[5],"bytes":16},{"rank":3,"coord":[1,1],"local_shape":[2],"global_offset":[7],"bytes":16}]}' \
    layout --mesh 2x2 --shape 9 --placements ' Shard(0) , s(0) ' --dtype float64 --json

# Uneven and empty shards; explicit ranks; canonical placement text; Partial op kept.
expect_output '{"schema":1,"command":"layout","mesh":[4],"ranks":[3,2,1,0],"shape":[5],"dtype":"bf16","placements":["P(avg)"],"blocks":[{"rank":3,"coord":[0],"local_shape":[5],"global_offset":[0],"bytes":10},{"rank":2,"coord":[1],"local_shape":[5],"global_offset":[0],"bytes":10},{"rank":1,"coord":[2],"local_shape":[5],"global_offset":[0],"bytes":10},{"rank":0,"coord":[3],"local_shape":[5],"global_offset":[0],"bytes":10}]}' \
    layout --mesh 4 --ranks 3,2,1,0 --shape 5 --placements 'Partial(avg)' --dtype bf16 --json
expect_output '{"schema":1,"command":"layout","mesh":[4],"shape":[5],"dtype":"f32","placements":["S(0)"],"blocks":[{"rank":0,"coord":[0],"local_shape":[2],"global_offset":[0],"bytes":8},{"rank":1,"coord":[1],"local_shape":[2],"global_offset":[2],"bytes":8},{"rank":2,"coord":[2],"local_shape":[1],"global_offset":[4],"bytes":4},{"rank":3,"coord":[3],"local_shape":[0],"global_offset":[5],"bytes":0}]}' \
    layout --mesh 4 --shape 5 --placements 'S(-1)' --json
expect_output '{"schema":1,"command":"layout","mesh":[2],"shape":[],"dtype":"u8","placements":["R"],"blocks":[{"rank":0,"coord":[0],"local_shape":[],"global_offset":[],"bytes":1},{"rank":1,"coord":[1],"local_shape":[],"global_offset":[],"bytes":1}]}' \
    layout --mesh 2 --shape scalar --placements R --dtype u8 --json

# Shard orders: FSDP2 + TP on dim 0 (tp splits first), written as PyTorch prints the order
# and as its _StridedShard; both give rows 0-1, 4-5, 2-3, 6-7 on ranks 0..3.
fsdp_tp='{"schema":1,"command":"layout","mesh":[2,2],"shape":[8],"dtype":"f32","placements":["S(0)[1]","S(0)[0]"],"blocks":[{"rank":0,"coord":[0,0],"local_shape":[2],"global_offset":[0],"bytes":8},{"rank":1,"coord":[0,1],"local_shape":[2],"global_offset":[4],"bytes":8},{"rank":2,"coord":[1,0],"local_shape":[2],"global_offset":[2],"bytes":8},{"rank":3,"coord":[1,1],"local_shape":[2],"global_offset":[6],"bytes":8}]}'
expect_output "$fsdp_tp" layout --mesh 2x2 --shape 8 --placements 'S(0)[1],S(0)[0]' --json
expect_output "$fsdp_tp" layout --mesh 2x2 --shape 8 --placements '_StridedShard(dim=0, sf=2), Shard(dim=0)' --json
expect_contains "S(d)[k]: the k-th mesh dim (from 0) to split d, a shard order" layout --help

expect_output 'mesh 2x2  shape 2x5  dtype f32  placements S(1),S(1)

  rank  coord              local_shape           global_offset             bytes
     0  (0,0)              2x2                   (0,0)                     16
     1  (0,1)              2x1                   (0,2)                     8
     2  (1,0)              2x1                   (0,3)                     8
     3  (1,1)              2x1                   (0,4)                     8

40 bytes held over 4 ranks; the tensor is 40 bytes' \
    layout --mesh 2x2 --shape 2x5 --placements 'S(1),S(1)'

expect_contains 'usage: dtr COMMAND' --help
expect_contains '  3  the change was refused' --help
expect_contains 'layout     show each rank' -h
expect_contains "dtr layout --mesh 2x2 --shape 2x5 --placements 'S(1),S(1)'" --help
expect_contains 'usage: dtr layout --mesh MESH' layout --help
# every dtype of the library, c64 and c128 among them (the list comes from its table)
expect_contains 'f32, f64, f16, bf16, i32, i64, u8, f8e4m3, f8e5m2, c64, c128' layout --help
expect_contains '--placements LIST' help layout
expect_contains 'examples:' layout -h
expect_output "dtr $version" --version

# a mesh past 64 ranks lists the first 64 (2^31-1 once printed two billion lines); --all
# lists and sums every rank; --json refuses more than a million without --all
expect_contains '   ...  (1 more rank: --all lists every rank)' layout --mesh 65 --shape 130 --placements 'S(0)'
expect_contains '520 bytes held over 65 ranks; the tensor is 520 bytes' layout --mesh 65 --shape 130 --placements 'S(0)'
expect_contains '2147483647 ranks; the tensor is 16 bytes (--all sums what they hold)' layout --mesh 2147483647 --shape 4 --placements R
expect_contains '    64  (64)               2                     (128)                     8' layout --mesh 65 --shape 130 --placements 'S(0)' --all
if [ "$(timeout 60 "$dtr" layout --mesh 2147483647 --shape 4 --placements R | wc -l)" -eq 70 ]; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: a 2^31-1 rank mesh's table is not 70 lines"
fi
err=$(mktemp)
if "$dtr" layout --mesh 2147483647 --shape 4 --placements R --json >/dev/null 2>"$err"; then
    fail=$((fail + 1))
    echo "FAIL: --json of 2^31-1 blocks without --all"
elif grep -qF 'dtr layout: --json: 2147483647 blocks, more than 1048576; --all prints them all' "$err"; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: --json of 2^31-1 blocks: $(cat "$err")"
fi
rm -f "$err"

echo "cli layout: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
