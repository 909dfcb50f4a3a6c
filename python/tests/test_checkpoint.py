"""`dtr reshard` on files the Python `safetensors` package wrote, and dtr's files read back by
`safetensors.safe_open` (issue 62): a random model in the dtypes the package reads back with
numpy (bf16 through ml_dtypes, f16, f32, f64, integers), uneven shapes, saved on 4 ranks as 2x2, resharded to 2 ranks
by other rules, consolidated on 3, and compared with the original bit for bit; every rank's
file of the 2x2 save holds exactly its blocks. Runs the installed CLI (DTR_CLI) under its own
mpirun, so only in the one-rank pass of python/tests/run.sh."""
import json
import os
import subprocess

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
from safetensors import safe_open  # noqa: E402

CLI = os.environ.get("DTR_CLI")
pytestmark = [
    pytest.mark.skipif(not CLI, reason="DTR_CLI (the installed dtr CLI) not set"),
    pytest.mark.skipif(os.environ.get("OMPI_COMM_WORLD_SIZE", "1") != "1",
                       reason="runs its own mpirun: the one-rank pass only"),
]

# (not fp8: safetensors.numpy writes ml_dtypes' fp8 arrays but cannot read them back, as it
# looks for numpy.float8_*; tests/cli/cli_reshard.sh covers fp8 byte for byte)
DTYPES = [np.float32, ml_dtypes.bfloat16, np.float16, np.int64, np.int32, np.uint8,
          np.float64]


def model(seed):
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(4):
        for kind in ("attn", "mlp"):
            shape = tuple(int(x) for x in rng.integers(1, 14, size=int(rng.integers(2, 4))))
            dt = DTYPES[int(rng.integers(len(DTYPES)))]
            out[f"h.{i}.{kind}.weight"] = rng.standard_normal(shape).astype(dt)
            out[f"h.{i}.{kind}.bias"] = rng.standard_normal(int(rng.integers(1, 18))).astype(dt)
    out["wte"] = (rng.standard_normal((int(rng.integers(5, 30)), 7)) * 100).astype(np.float32)
    return out


def reshard(n, *args):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "ORTE_", "OPAL_")) or "RUN_AS_ROOT" in k}
    r = subprocess.run(["mpirun", "--oversubscribe", "-n", str(n), CLI, "reshard", *args],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def same(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert a[k].tobytes() == b[k].tobytes(), k


def test_safetensors_round_trip_through_reshard(tmp_path, seed):
    original = model(seed)
    src = tmp_path / "model.safetensors"
    safetensors_numpy.save_file(original, str(src))
    r4 = tmp_path / "r4.json"
    r4.write_text(json.dumps([{"match": "*.attn.weight", "placements": "S(0),S(1)"},
                              {"match": "*.mlp.weight", "placements": "S(1),S(0)"},
                              {"match": "*.bias", "placements": "R,S(0)"},
                              {"match": "*", "placements": "S(0),R"}]))
    r2 = tmp_path / "r2.json"
    r2.write_text(json.dumps([{"match": "h.[13].*", "placements": "S(0)"},
                              {"match": "*", "placements": "R"}]))
    out = reshard(4, "--from", str(src), "--to", str(tmp_path / "tp4"), "--mesh", "2x2",
                  "--rules", str(r4))
    assert "rule 0 ('*.attn.weight': S(0),S(1))" in out
    reshard(2, "--from", str(tmp_path / "tp4"), "--to", str(tmp_path / "tp2"), "--mesh", "2",
            "--rules", str(r2))
    reshard(3, "--from", str(tmp_path / "tp2"), "--to", str(tmp_path / "whole"),
            "--consolidate")
    same(original, safetensors_numpy.load_file(str(tmp_path / "whole" / "model.safetensors")))

    # every piece of the 2x2 save, read by safe_open, is the original's box
    manifest = json.loads((tmp_path / "tp4" / "dtr.manifest.json").read_text())
    assert manifest["mesh"] == "2x2" and len(manifest["files"]) == 4
    seen = 0
    for name, entry in manifest["tensors"].items():
        for piece in entry["pieces"]:
            path = tmp_path / "tp4" / manifest["files"][piece["file"]]
            with safe_open(str(path), "np") as f:
                block = f.get_tensor(name)
            box = tuple(slice(o, o + s) for o, s in zip(piece["offset"], piece["shape"]))
            assert block.dtype == original[name].dtype, name
            assert block.tobytes() == np.ascontiguousarray(original[name][box]).tobytes(), name
            seen += 1
    assert seen >= len(original)
