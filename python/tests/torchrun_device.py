"""The parity cases (test_parity.py) on device memory under torchrun, on the torch engine
(Mesh(..., backend="torch", device=DEVICE)): every block on the device, of each kind asked
for. Without a GPU: device "fake" (fake_space.py: the C tests' fake device), torch on gloo,
the context staging each operation through host memory. On a GPU (the GPU pack's part
"python"): device "cuda" with torch on nccl (the engine hands NCCL the GPU buffers
themselves; one rank per GPU) or on gloo (staged; ranks may share a GPU), blocks as torch
CUDA tensors, dtr.DeviceArrays and CuPy arrays; and with --backend nccl, dtr's own NCCL
contexts (Mesh(..., backend="nccl"), their unique id through torch's store; one rank per
GPU) on the forms within one mesh.

    torchrun --nproc-per-node N python/tests/torchrun_device.py [CASES]
        [--device fake|cuda] [--pg gloo|nccl] [--kinds array,torch,cupy] [--backend torch|nccl]

Ends with "torchrun device: N passed, N failed" on rank 0."""
import argparse
import os
import sys
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dtr  # noqa: E402
import fake_space  # noqa: E402
import test_parity as parity  # noqa: E402


def run_kind(seed, cases, kind, rank, forms):
    """The forms' cases with blocks of `kind`: (passed, failed)."""
    parity.KIND = kind
    passed = failed = 0
    for form in forms:
        for k in range(cases):
            try:
                parity.run_case(seed, k, form.startswith("cross"), form.endswith("many"))
                passed += 1
            except Exception:  # (the case and seed are in the message)
                failed += 1
                print(f"  FAILED rank {rank} {kind} {form} seed {seed} case {k}:\n"
                      f"{traceback.format_exc(limit=3)}", flush=True)
                dist.barrier()
    return passed, failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="?", type=int, default=20)
    ap.add_argument("--device", default="fake", choices=["fake", "cuda"])
    ap.add_argument("--pg", default="gloo", choices=["gloo", "nccl"])
    ap.add_argument("--kinds", default=None)
    ap.add_argument("--backend", default="torch", choices=["torch", "nccl"])
    a = ap.parse_args()
    if a.backend == "nccl" and a.device != "cuda":
        sys.exit("torchrun device: --backend nccl needs --device cuda")
    # dtr's own NCCL contexts move within one mesh (their changes between meshes are not yet)
    forms = ("one", "many") if a.backend == "nccl" else ("one", "many", "cross", "cross_many")
    kinds = (a.kinds or ("array" if a.device == "fake" else "torch,array,cupy")).split(",")
    if a.device == "cuda":
        if torch.cuda.device_count() == 0:
            sys.exit("torchrun device: --device cuda, and torch sees no GPU here")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group(a.pg)
    rank = dist.get_rank()
    seed = int(os.environ.get("DTR_PY_SEED", "20261130"))
    if a.device == "fake":
        fake_space.fake_space()
    parity.BACKEND, parity.DEVICE = a.backend, a.device
    passed = failed = 0
    for kind in kinds:
        if kind == "cupy":
            try:
                import cupy  # noqa: F401
            except ImportError:
                if rank == 0:
                    print("torchrun device: cupy: skipped (no CuPy here)", flush=True)
                continue
        p, f = run_kind(seed, a.cases, kind, rank, forms)
        passed, failed = passed + p, failed + f
    if a.device == "fake":
        counts = fake_space.counts()
        if counts["refused"] != 0 or counts["from_host"] == 0:
            failed += 1
            print(f"  FAILED rank {rank}: fake device counts {counts}", flush=True)
        else:
            passed += 1
    totals = torch.tensor([passed, failed], device="cuda" if a.pg == "nccl" else "cpu")
    dist.all_reduce(totals)
    if rank == 0:
        print(f"torchrun device: seed {seed}, {a.cases} cases a form, kinds {','.join(kinds)}, "
              f"device {a.device}, dtr's backend {a.backend}, torch on {a.pg}, "
              f"{dist.get_world_size()} ranks", flush=True)
        print(f"torchrun device: {totals[0].item()} passed, {totals[1].item()} failed",
              flush=True)
    dist.destroy_process_group()
    return 0 if totals[1].item() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
