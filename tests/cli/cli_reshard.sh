#!/usr/bin/env bash
# `dtr reshard`: random models (tests/cli/st_model.py: every dtype dtr shares with the
# format, uneven lengths, random bytes) and the Python-written fixture saved on 4 ranks as
# 2x2, resharded to 2 ranks by other rules, consolidated on 3 (one file, and several with an
# index), each compared with the original byte for byte; every rank reads only its blocks'
# bytes; the unhappy paths: usage errors, a tensor no rule matches, a non-empty --to, a
# corrupt piece (its checksum), a manifest that disagrees with its files: each named, and
# nothing left in --to.
# Usage: cli_reshard.sh DTR
set -u
dtr=$1
here=$(dirname "$0")
source "$here/check_lib.sh"
model="python3 $here/st_model.py"
w=$(mktemp -d)
trap 'rm -rf "$w" "$out" "$err"' EXIT

cat >"$w/r4.json" <<'JSON'
[{"match": "layers.*.attn.weight", "placements": "S(0),S(1)"},
 {"match": "layers.*.mlp.weight", "placements": "S(0)[1],S(0)[0]"},
 {"match": "*.bias", "placements": "S(0),R"},
 {"match": "embed.*", "placements": "R,S(0)"},
 {"match": "*", "placements": "R,R"}]
JSON
cat >"$w/r2.json" <<'JSON'
[{"match": "*.weight", "placements": "S(-1)"},
 {"match": "layers.[02468].*", "placements": "S(0)"},
 {"match": "*", "placements": "R"}]
JSON

# chain SRC TAG: SRC -> 2x2 on 4 ranks -> 2 ranks -> consolidated on 3 (one file; several
# past 200 bytes), each consolidation compared with SRC
chain() {
    local src=$1 tag=$2 ok=1
    for step in "4 $src $w/$tag.4 --mesh 2x2 --rules $w/r4.json" \
        "2 $w/$tag.4 $w/$tag.2 --mesh 2 --rules $w/r2.json" \
        "3 $w/$tag.2 $w/$tag.one --consolidate" \
        "3 $w/$tag.2 $w/$tag.many --consolidate --max-file-bytes 200"; do
        read -r n from to rest <<<"$step"
        # shellcheck disable=SC2086
        timeout 120 "${mpirun[@]}" -n "$n" "$dtr" reshard --from "$from" --to "$to" $rest \
            >"$out" 2>"$err" || { ok=0; echo "  reshard to $to failed:"; cat "$err"; break; }
    done
    if [ $ok -eq 1 ]; then
        $model compare "$src" "$w/$tag.one" >"$out" || ok=0
        $model compare "$src" "$w/$tag.many" >>"$out" || ok=0
        [ -f "$w/$tag.many/model.safetensors.index.json" ] || ok=0
    fi
    if [ $ok -eq 1 ]; then
        pass=$((pass + 1))
        echo "ok: $tag: 2x2 on 4, 2 on 2, consolidated on 3: $(head -1 "$out")"
    else
        fail=$((fail + 1))
        echo "FAIL: $tag (seed or file above)"
        sed 's/^/  /' "$out" | head -5
    fi
}

chain "$here/../checkpoint/data/py_model.safetensors" python-written
chain "$here/../checkpoint/data/sharded" python-written-index
seed0=${DTR_SEED:-20261128}
for k in 0 1 2; do
    seed=$((seed0 + k))
    $model write "$w/model$k.safetensors" "$seed"
    chain "$w/model$k.safetensors" "random-seed-$seed"
done

# Each rank reads only its blocks: saved as S(0) on 4 ranks, the largest read of a rank
# (the report's) is well under the whole model.
total=$(stat -c %s "$w/model0.safetensors")
echo '[{"match": "step", "placements": "R"}, {"match": "*", "placements": "S(0)"}]' >"$w/s0.json"
check "a rank reads at most its blocks' bytes" 4 0 "each rank read at most" "" \
    reshard --from "$w/model0.safetensors" --to "$w/again" --mesh 4 --rules "$w/s0.json"
maxread=$(grep -oE 'each rank read at most [0-9]+' "$out" | grep -oE '[0-9]+$')
if [ -n "$maxread" ] && [ "$maxread" -lt "$total" ]; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: largest read per rank ${maxread:-?} bytes, the file is $total"
fi

# Progress on stderr (DTR_PROGRESS_S=0: after every tensor but the last): rank 0's tensors
# done and left, the bytes it read so far and their rate.
ntensors=$(python3 -c 'import json,struct,sys
f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]
print(len([k for k in json.loads(f.read(n)) if k!="__metadata__"]))' "$w/model0.safetensors")
launch_asan 2
ASAN_OPTIONS=$asan DTR_PROGRESS_S=0 timeout 120 "${mpirun[@]}" -n 2 "$dtr" reshard --from "$w/model0.safetensors" \
    --to "$w/progress" --mesh 2 --rules "$w/s0.json" >"$out" 2>"$err"
lines=$(grep -cE "^dtr reshard: tensors \(rank 0: [0-9]+\.[0-9]{3} GB read, [0-9]+\.[0-9]{2} GB/s\): [0-9]+ of $ntensors done, [0-9]+ left" "$err")
if [ "$lines" -eq $((ntensors - 1)) ] && grep -q "of $ntensors done, 1 left" "$err"; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: progress: $lines lines for $ntensors tensors"
    sed 's/^/  stderr: /' "$err" | head -5
fi

# left_nothing DIR: a refused run made no --to directory.
left_nothing() {
    if [ -e "$1" ]; then
        fail=$((fail + 1))
        echo "FAIL: a refused run left $1"
    else
        pass=$((pass + 1))
    fi
}

# Usage errors (exit 2, one line from rank 0), and nothing made in --to.
check "no --from" 0 2 "" "dtr reshard: --from: missing" reshard --to "$w/x" --consolidate
check "no --rules" 0 2 "" "dtr reshard: --rules: missing (or --consolidate)" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --mesh 2
check "--mesh with --consolidate" 0 2 "" "--mesh: not with --consolidate" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --mesh 2 --consolidate
check "mesh not the job" 2 2 "" "--mesh: 4 ranks, the job has 2" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --mesh 2x2 --rules "$w/r4.json"
echo '[{"match": "*.weight", "placements": "S(0)"}]' >"$w/partial.json"
check "a tensor no rule matches" 2 2 "" "tensor 'layers.0.attn.bias' matches no rule" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --mesh 2 --rules "$w/partial.json"
echo '[{"match": "*", "placements": "S(0),R"}]' >"$w/twodims.json"
check "placements not one per mesh dim" 2 2 "" "rule 0: placements 'S(0),R': 2 for a 1-dim mesh" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --mesh 2 --rules "$w/twodims.json"
echo '[{"match": "*", "placements": "S(1)"}]' >"$w/s1.json"
check "a shard dim the tensor lacks" 2 2 "" "with rule 0 ('*': S(1)): placements[0]" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --mesh 2 --rules "$w/s1.json"
echo '[{"match": "*", "placements": "R", "how": 1}]' >"$w/key.json"
check "an unknown key in a rule" 2 2 "" "rule 0: unknown key \"how\"" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --mesh 2 --rules "$w/key.json"
check "rules file missing" 2 2 "" \
    "--rules: dtr_checkpoint_rules_load: $w/r4.json.none: No such file or directory" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --mesh 2 --rules "$w/r4.json.none"
echo '[{"match": "*",' >"$w/cut.json"
check "rules not JSON" 2 2 "" "--rules: dtr_checkpoint_rules_load: $w/cut.json: line 2" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --mesh 2 --rules "$w/cut.json"
# Rules a tensor cannot take and sources that cannot be saved: refused before anything is
# written (exit 2), not while writing (exit 1)
echo '[{"match": "*", "placements": "P"}]' >"$w/rP.json"
check "a Partial rule" 2 2 "" \
    "--rules: dtr_checkpoint_rules_load: $w/rP.json: rule 0: placements 'P': Partial: a checkpoint holds whole values, not addends" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --mesh 2 --rules "$w/rP.json"
echo '[{"match": "*", "placements": "S(0)", "dtype": "i32"}]' >"$w/rint.json"
check "an integer cast of a float tensor" 2 2 "" "as i32): casts are between float dtypes only" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --mesh 2 --rules "$w/rint.json"
python3 - "$w" <<'PY'
import json, struct, sys
def st(path, tensors):
    hdr, off, data = {}, 0, b""
    for name, b in tensors.items():
        hdr[name] = {"dtype": "F32", "shape": [len(b) // 4], "data_offsets": [off, off + len(b)]}
        off, data = off + len(b), data + b
    h = json.dumps(hdr).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
st(sys.argv[1] + "/noname.safetensors", {"": struct.pack("<4f", 1, 2, 3, 4)})
st(sys.argv[1] + "/empty.safetensors", {})
PY
echo '[{"match": "*", "placements": "S(0)"}]' >"$w/s0.json"
check "a tensor named ''" 2 2 "" "--from: tensor 0 has an empty name (a checkpoint cannot name it)" \
    reshard --from "$w/noname.safetensors" --to "$w/x" --mesh 2 --rules "$w/s0.json"
check "an empty header" 2 2 "" "--from: '$w/empty.safetensors' holds no tensors (nothing to reshard)" \
    reshard --from "$w/empty.safetensors" --to "$w/x" --mesh 2 --rules "$w/s0.json"
check "an empty header, consolidated" 2 2 "" "holds no tensors" \
    reshard --from "$w/empty.safetensors" --to "$w/x" --consolidate
check "no such --from" 2 2 "" "dtr reshard: ranks 0-1: --from: dtr_checkpoint_open: $w/none: No such file" \
    reshard --from "$w/none" --to "$w/x" --consolidate
mkdir -p "$w/nothing"
check "a directory without a checkpoint" 2 2 "" "$w/nothing: no .safetensors file and no model.safetensors.index.json" \
    reshard --from "$w/nothing" --to "$w/x" --consolidate
check "--to not empty" 2 2 "" "--to: $w/python-written.4 exists and is not empty" \
    reshard --from "$w/model0.safetensors" --to "$w/python-written.4" --consolidate
left_nothing "$w/x"
# a value refused on one rank alone, in a check made after the arguments' first verdict
# (--max-file-bytes is read by the consolidation): every rank exits 2, rank 0 printing the
# bad rank's message (it was silent)
with_rank_args 1 "--max-file-bytes -1" "--max-file-bytes 100" \
    "--max-file-bytes refused on rank 1 alone" 2 2 "" \
    "dtr reshard: rank 1: --max-file-bytes: '-1' is not a byte count 1..2^50" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --consolidate
left_nothing "$w/x"
# rules that match no tensor on one rank alone (checked as each rank makes its specs)
echo '[{"match": "nothing*", "placements": "S(0)"}]' >"$w/none.json"
with_rank_args 1 "--rules $w/none.json" "--rules $w/r2.json" \
    "rules that match nothing on rank 1 alone" 2 2 "" "dtr reshard: rank 1: --rules:" \
    reshard --from "$w/model0.safetensors" --to "$w/x" --mesh 2
left_nothing "$w/x"
check "help" 0 0 "mpirun -n M dtr reshard --from SRC --to DIR --mesh MESH --rules FILE" "" \
    reshard --help

# Failures while running (exit 1, each failing rank says why): --to removed again. Then
# sources that fail to open (exit 2, said once).
# expect_fail NAME RANKS FRAGMENT ARGS...
expect_fail() {
    local name=$1 n=$2 frag=$3
    shift 3
    timeout 120 "${mpirun[@]}" -n "$n" "$dtr" "$@" >"$out" 2>"$err"
    local rc=$?
    if [ $rc -eq 1 ] && grep -qF -- "$frag" "$err" && [ ! -e "$w/y" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $name (exit $rc; want 1, '$frag', no $w/y)"
        sed 's/^/  stderr: /' "$err" | head -4
    fi
}
cp -r "$w/random-seed-$seed0.2" "$w/corrupt"
f=$(ls "$w/corrupt"/rank-00001-*.safetensors)
printf '\x55' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 1)) conv=notrunc status=none
expect_fail "a corrupt piece fails its checksum" 3 "fails its checksum" \
    reshard --from "$w/corrupt" --to "$w/y" --consolidate
cp -r "$w/random-seed-$seed0.2" "$w/liar"
python3 - "$w/liar/dtr.manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
t = m["tensors"]["embed.weight"]
t["pieces"][0]["shape"][0] += 1
json.dump(m, open(sys.argv[1], "w"))
PY
check "a manifest that disagrees with its file" 2 2 "" "tensor 'embed.weight': " \
    reshard --from "$w/liar" --to "$w/y" --consolidate
cp -r "$w/random-seed-$seed0.2" "$w/mesh0"
sed -i 's/"mesh": *"[0-9x]*"/"mesh": "0"/' "$w/mesh0/dtr.manifest.json"
check "a manifest with mesh '0'" 2 2 "" "dtr.manifest.json: mesh '0': text \"0\": dim 0: 0, must be >= 1" \
    reshard --from "$w/mesh0" --to "$w/y" --consolidate
left_nothing "$w/y"

finish "cli reshard"
