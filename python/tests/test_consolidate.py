"""dtr.consolidate: a model the safetensors package wrote, split into files by dtr, read back
by the package (safe_open) equal bit for bit, its metadata kept; one file and several with an
index; the unhappy paths named and nothing written. Not collective: the one-process pass."""
import json
import os

import numpy as np
import pytest

import dtr

ml_dtypes = pytest.importorskip("ml_dtypes")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
from safetensors import safe_open  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.environ.get("OMPI_COMM_WORLD_SIZE", "1") != "1" or "WORLD_SIZE" in os.environ,
    reason="one process writes the files: the one-rank pass only")

DTYPES = [np.float32, ml_dtypes.bfloat16, np.float16, np.int64, np.int32, np.uint8, np.float64]


def model(seed):
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(9):
        shape = tuple(int(x) for x in rng.integers(0, 7, size=int(rng.integers(1, 4))))
        dt = DTYPES[i % len(DTYPES)]
        out[f"layers.{i}.w"] = (rng.standard_normal(shape) * 50).astype(dt)
    out["step"] = np.array(7, dtype=np.int64)
    return out


def read_dir(d):
    got = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(d, f), "np") as h:
                for k in h.keys():
                    got[k] = h.get_tensor(k)
    return got


@pytest.mark.parametrize("max_bytes", [0, 64])
def test_consolidate_round_trip(tmp_path, seed, max_bytes):
    src = model(seed)
    safetensors_numpy.save_file(src, str(tmp_path / "in.safetensors"), metadata={"format": "pt"})
    to = tmp_path / "out"
    dtr.consolidate(tmp_path / "in.safetensors", to, max_file_bytes=max_bytes)
    files = sorted(os.listdir(to))
    if max_bytes == 0:
        assert files == ["model.safetensors"]
    else:
        assert "model.safetensors.index.json" in files and len(files) > 2, files
        index = json.load(open(to / "model.safetensors.index.json"))
        assert set(index["weight_map"]) == set(src)
        assert index["metadata"]["format"] == "pt"
        assert int(index["metadata"]["total_size"]) == sum(a.nbytes for a in src.values())
    got = read_dir(to)
    assert set(got) == set(src)
    for k, a in src.items():
        assert got[k].dtype == a.dtype and got[k].shape == a.shape, k
        assert got[k].tobytes() == a.tobytes(), f"{k} differs (seed {seed})"
    assert dtr.load_metadata(to)["format"] == "pt"


def test_consolidate_unhappy_paths(tmp_path):
    safetensors_numpy.save_file({"a": np.zeros(3, np.float32)}, str(tmp_path / "in.safetensors"))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep")
    with pytest.raises(dtr.ArgumentError, match="exists and is not empty"):
        dtr.consolidate(tmp_path / "in.safetensors", tmp_path / "full")
    assert os.listdir(tmp_path / "full") == ["mine.txt"]
    with pytest.raises(dtr.FileError):
        dtr.consolidate(tmp_path / "missing.safetensors", tmp_path / "x")
    assert not (tmp_path / "x").exists()
    with pytest.raises(dtr.ArgumentError, match="max_file_bytes: -1 is not a byte count"):
        dtr.consolidate(tmp_path / "in.safetensors", tmp_path / "y", max_file_bytes=-1)
    with pytest.raises(dtr.ArgumentError, match="max_file_bytes: expected an int, got float"):
        dtr.consolidate(tmp_path / "in.safetensors", tmp_path / "y", max_file_bytes=1.5)
    with pytest.raises(dtr.ArgumentError, match="to: expected a str or os.PathLike, got int"):
        dtr.consolidate(tmp_path / "in.safetensors", 3)
    assert not (tmp_path / "y").exists()
