"""Shared by the tests: the seed (DTR_PY_SEED, printed), and under mpirun an abort of the
whole job when a test fails on one rank (the others would wait in its next collective)."""
import os
import sys

import pytest

SEED = int(os.environ.get("DTR_PY_SEED", "20261127"))


def world():
    from mpi4py import MPI
    return MPI.COMM_WORLD


def pytest_report_header(config):
    return f"dtr tests: seed {SEED} (DTR_PY_SEED to change)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and "mpi4py.MPI" in sys.modules:
        comm = world()
        if comm.Get_size() > 1:
            sys.stderr.write(f"\n[rank {comm.Get_rank()}] FAILED {item.nodeid} (seed {SEED}):\n"
                             f"{report.longreprtext}\n")
            sys.stderr.flush()
            comm.Abort(1)


@pytest.fixture
def seed():
    return SEED
