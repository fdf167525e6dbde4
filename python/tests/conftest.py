"""Shared fixtures: the simulated GPU (libgearshift_simgpu.so shipped in the package) and a fake
torch.distributed made of real processes (fork), so no test needs a GPU or torch."""

import multiprocessing as mp
import os
import pathlib
import traceback

import pytest

import gearshift

SHARED = pathlib.Path(__file__).resolve().parents[2].parent / "shared"
DDP_TRACES = [SHARED / "data" / "traces" / f"ddp2_gpt2m_rank{r}_h200_trace.json.gz" for r in (0, 1)]


@pytest.fixture
def simgpu(monkeypatch, tmp_path):
    """The simulated GPU at 300 W, one GPU; returns a function to change its settings."""
    monkeypatch.setenv("GEARSHIFT_NVML_LIBRARY", gearshift.simulated_gpu_library())
    monkeypatch.setenv("GEARSHIFT_SIMGPU_POWER_W", "300")
    monkeypatch.setenv("GEARSHIFT_SIMGPU_COUNT", "1")
    monkeypatch.setenv("GEARSHIFT_SIMGPU_STATE", str(tmp_path / "simgpu.state"))
    monkeypatch.setenv("GEARSHIFT_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.delenv("GEARSHIFT_SIMGPU_FAULT", raising=False)

    def configure(**env):
        for k, v in env.items():
            monkeypatch.setenv(f"GEARSHIFT_SIMGPU_{k.upper()}", str(v))

    return configure


class FakeDist:
    """The four torch.distributed calls gearshift uses, over processes sharing a Manager dict + Barrier."""

    def __init__(self, rank, world, store, barrier):
        self.rank, self.world, self.store, self.barrier = rank, world, store, barrier
        self.round = 0

    def get_rank(self, group=None):
        return self.rank

    def get_world_size(self, group=None):
        return self.world

    def all_gather_object(self, out, obj, group=None):
        self.round += 1
        self.store[(self.round, self.rank)] = obj
        self.barrier.wait()
        for r in range(self.world):
            out[r] = self.store[(self.round, r)]
        self.barrier.wait()

    def scatter_object_list(self, out, in_list, src=0, group=None):
        self.round += 1
        if self.rank == src:
            assert in_list is not None and len(in_list) == self.world
            for r in range(self.world):
                self.store[(self.round, r)] = in_list[r]
        self.barrier.wait()
        out[0] = self.store[(self.round, self.rank)]
        self.barrier.wait()


def _child(fn, rank, world, store, barrier, results):
    try:
        results.put((rank, "ok", fn(FakeDist(rank, world, store, barrier), rank)))
    except BaseException as e:  # report, never hang the parent
        results.put((rank, "error", (type(e).__name__, str(e), traceback.format_exc())))


def run_ranks(fn, world):
    """Runs fn(dist, rank) in `world` forked processes; returns {rank: ("ok", value) | ("error", info)}."""
    ctx = mp.get_context("fork")
    with ctx.Manager() as mgr:
        store, barrier, results = mgr.dict(), ctx.Barrier(world, timeout=120), ctx.Queue()
        procs = [ctx.Process(target=_child, args=(fn, r, world, store, barrier, results)) for r in range(world)]
        for p in procs:
            p.start()
        out = {}
        for _ in range(world):
            rank, status, value = results.get(timeout=300)
            out[rank] = (status, value)
        for p in procs:
            p.join(timeout=60)
    return out


@pytest.fixture
def ranks():
    return run_ranks


def have_ddp_traces():
    return all(p.exists() for p in DDP_TRACES)


os.environ.setdefault("GEARSHIFT_TEST", "1")
