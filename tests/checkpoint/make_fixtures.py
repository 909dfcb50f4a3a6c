"""Writes tests/checkpoint/data/ with the Python `safetensors` package (0.8.0 when made):
files as the format's own writer lays them out (its header order, its padding), which
checkpoint_test.c reads back value by value. Rerun to remake them:

    python3 tests/checkpoint/make_fixtures.py     (needs numpy and safetensors)

Every value is a formula of its flat index k, so the test needs no copy of the arrays:
  w   f32  6x5    k * 0.5 - 7
  b   bf16 7      k - 3            (exact in bf16)
  e   i64  3x4x2  k * 1000003 - 5
  s   f32  scalar 2.25
The sharded form splits the same tensors over two files with model.safetensors.index.json
(as transformers writes it: "metadata" with total_size, "weight_map" name -> file).
"""
import json
import os

import numpy as np
from safetensors.numpy import save_file

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
os.makedirs(os.path.join(here, "sharded"), exist_ok=True)
import ml_dtypes  # noqa: E402  (bf16 for numpy)

w = (np.arange(30, dtype=np.float32) * 0.5 - 7).reshape(6, 5)
b = (np.arange(7, dtype=np.float32) - 3).astype(ml_dtypes.bfloat16)
e = (np.arange(24, dtype=np.int64) * 1000003 - 5).reshape(3, 4, 2)
s = np.array(2.25, dtype=np.float32)
save_file({"w": w, "b": b, "e": e, "s": s}, os.path.join(here, "py_model.safetensors"),
          metadata={"format": "pt"})
save_file({"w": w, "s": s}, os.path.join(here, "sharded", "model-00001-of-00002.safetensors"))
save_file({"b": b, "e": e}, os.path.join(here, "sharded", "model-00002-of-00002.safetensors"))
index = {"metadata": {"total_size": int(w.nbytes + s.nbytes + b.nbytes + e.nbytes)},
         "weight_map": {"w": "model-00001-of-00002.safetensors",
                        "s": "model-00001-of-00002.safetensors",
                        "b": "model-00002-of-00002.safetensors",
                        "e": "model-00002-of-00002.safetensors"}}
with open(os.path.join(here, "sharded", "model.safetensors.index.json"), "w") as f:
    json.dump(index, f, indent=2)
