"""Safetensors models for tests/cli/cli_reshard.sh, with nothing but the standard library:

    st_model.py write PATH SEED     a random model: weights (2-3 dims), biases (1 dim) and a
                                    scalar, uneven lengths, every dtype the format shares
                                    with dtr, random bytes (NaNs and all: compared as bytes)
    st_model.py compare A B         A and B (a .safetensors file or a directory of them) hold
                                    the same tensors: names, dtypes, shapes and bytes; exit 1
                                    naming the first difference
"""
import json
import os
import random
import struct
import sys

DTYPES = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F64": 8, "I64": 8,
          "I32": 4, "U8": 1}


def write(path, seed):
    rng = random.Random(seed)
    tensors = {}
    for i in range(rng.randint(3, 6)):
        for kind in ("attn", "mlp"):
            nd = rng.randint(2, 3)
            tensors[f"layers.{i}.{kind}.weight"] = [rng.randint(1, 13) for _ in range(nd)]
            tensors[f"layers.{i}.{kind}.bias"] = [rng.randint(1, 17)]
    tensors["embed.weight"] = [rng.randint(5, 29), rng.randint(1, 9)]
    tensors["step"] = []
    header, blobs, at = {}, [], 0
    for name in sorted(tensors, key=lambda n: rng.random()):  # the writer's order is free
        dt = rng.choice(sorted(DTYPES))
        n = DTYPES[dt]
        for d in tensors[name]:
            n *= d
        header[name] = {"dtype": dt, "shape": tensors[name], "data_offsets": [at, at + n]}
        blobs.append(bytes(rng.getrandbits(8) for _ in range(n)))
        at += n
    header["__metadata__"] = {"seed": str(seed)}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read(path):
    files = [path] if os.path.isfile(path) else [
        os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".safetensors")]
    out = {}
    for p in files:
        with open(p, "rb") as f:
            raw = f.read()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + n])
        header.pop("__metadata__", None)
        for name, t in header.items():
            b, e = t["data_offsets"]
            out[name] = (t["dtype"], t["shape"], raw[8 + n + b:8 + n + e])
    return out


def metadata(path):
    """What a reader takes as path's metadata: its first file's "__metadata__", and beside an
    index the index's "metadata" too (less its "total_size"); a dict of str."""
    files = [path] if os.path.isfile(path) else [
        os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".safetensors")]
    with open(files[0], "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        meta = dict(json.loads(f.read(n)).get("__metadata__", {}))
    index = os.path.join(path, "model.safetensors.index.json") if os.path.isdir(path) else ""
    if os.path.exists(index):
        with open(index) as f:
            for k, v in json.load(f).get("metadata", {}).items():
                if k != "total_size":
                    meta[k] = v if isinstance(v, str) else json.dumps(v)
    return meta


def compare(a, b):
    x, y = read(a), read(b)
    # every file written keeps the source's "__metadata__" (loaders check {"format": "pt"})
    ma = metadata(a)
    files = [b] if os.path.isfile(b) else [
        os.path.join(b, f) for f in sorted(os.listdir(b)) if f.endswith(".safetensors")]
    for p in files:
        with open(p, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            mb = json.loads(f.read(n)).get("__metadata__", {})
        if mb != ma:
            print(f"{p}: __metadata__ {mb}, the source's {ma}")
            return 1
    if sorted(x) != sorted(y):
        print(f"names differ: {sorted(set(x) ^ set(y))}")
        return 1
    for name in sorted(x):
        if x[name] != y[name]:
            print(f"tensor {name!r} differs: {x[name][:2]} vs {y[name][:2]}")
            return 1
    print(f"{len(x)} tensors equal: dtypes, shapes and every byte; __metadata__ {ma} kept")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
