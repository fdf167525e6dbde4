"""Multi-rank planning over a process group: real processes (fork) with a fake torch.distributed (the CI
machine has no torch: its PyPI wheel pulls the CUDA libraries, gigabytes, for a CPU-only test)."""

import pytest

import gearshift
import gearshift.distributed as gd
import gearshift.pipeline as gp

from conftest import DDP_TRACES, have_ddp_traces
from test_pipeline_hooks import _sweep_rows, one_f_one_b


def test_straggler_factors():
    assert gd.straggler_factors([0.1, 0.08, 0.05]) == pytest.approx([1.0, 1.25, 2.0])
    with pytest.raises(ValueError):
        gd.straggler_factors([])
    with pytest.raises(ValueError):
        gd.straggler_factors([0.1, 0.0])


def test_gather_step_times_over_three_processes(ranks):
    out = ranks(lambda dist, rank: gd.gather_step_times(0.1 + 0.01 * rank, dist=dist), world=3)
    for r in range(3):
        status, value = out[r]
        assert status == "ok"
        assert value == pytest.approx([0.10, 0.11, 0.12])


def _pipeline_rank(dist, rank):
    gp.recorder().clear()
    for kind, mb in one_f_one_b(rank, 2, 4):
        with gp.instruction(kind, microbatch=mb):
            pass
    # Rows from an earlier locked-clock sweep; the recorded rows at 1980 MHz are replaced by the sweep's.
    sweep = _sweep_rows(rank, 0.020 + 0.01 * rank, 0.040 + 0.02 * rank)
    return gd.plan_pipeline_stages(stage=rank, stages=2, microbatches=4, sm_clock_mhz=1980, power_w=500.0,
                                  step_time_s=[0.50, 0.60][rank], dist=dist, recorder=_Fixed(sweep))


class _Fixed(gp.Recorder):
    def __init__(self, rows):
        super().__init__()
        self.rows = rows

    def profile_rows(self, stage, sm_clock_mhz, power_w):
        return self.rows


def test_pipeline_planning_on_rank0_scattered_to_each_stage(ranks):
    out = ranks(_pipeline_rank, world=2)
    for r in range(2):
        status, value = out[r]
        assert status == "ok", value
        assert value["straggler_factor"] == pytest.approx(1.2)
        sched = value["schedule"]
        assert sched["name"] == "straggler"
        assert [(i["instruction"], i["microbatch"]) for i in sched["instructions"]] == one_f_one_b(r, 2, 4)
    assert out[0][1]["summary"] == out[1][1]["summary"]


def test_pipeline_planning_error_reaches_every_rank(ranks):
    def bad(dist, rank):
        return gd.plan_pipeline_stages(stage=rank, stages=2, microbatches=4, sm_clock_mhz=1980, power_w=1.0,
                                       step_time_s=0.5, dist=dist, recorder=gp.Recorder())  # nothing recorded

    out = ranks(bad, world=2)
    assert out[0][0] == "error" and out[1][0] == "error"
    assert out[0][1][0] == "ProfileError" and out[1][1][0] == "ProfileError"


@pytest.mark.skipif(not have_ddp_traces(), reason="needs ../shared/data/traces (DDP rank traces)")
def test_sync_slack_from_the_two_ddp_traces():
    # Rank 0's calibration to its measured power is refused (next test): the class priors, uncalibrated.
    res = gearshift.plan_ranks([str(p) for p in DDP_TRACES], calibrate=False)
    rep = res["report"]
    assert rep["modelled"] is True
    assert rep["straggler"] == 0
    r0, r1 = rep["ranks"]
    assert r0["comm_time_s"] == pytest.approx(0.0135, abs=0.003)
    assert r1["comm_time_s"] == pytest.approx(0.052, abs=0.004)
    assert r1["straggler_factor"] > 1.03
    assert r1["saving_pct"] > 10.0
    assert rep["job_step_time_after_s"] <= rep["job_step_time_before_s"] * (1 + 1e-9)
    assert res["plans"][1]["format"] == "gearshift-plan"
    assert res["plans"][1]["rank"] == 1
    # Every position says its kind (plan-ranks' plans lacked it: `run --plan` took copies for kernels).
    assert all(p["kind"] in ("kernel", "memcpy", "memset") for p in res["plans"][1]["positions"])
    lowered = [p for p in res["plans"][1]["positions"] if p["sm_clock_mhz"] < 1980]
    assert lowered  # rank 1 runs some of its step slower
    # The traces name no GPU: h200 assumed (gpu=None, as plan-ranks without --gpu), no warning.
    assert [r["gpu_selection"]["source"] for r in rep["ranks"]] == ["assumed", "assumed"]
    assert res["plans"][0]["gpu"] == "h200" and rep["warnings"] == []


@pytest.mark.skipif(not have_ddp_traces(), reason="needs ../shared/data/traces (DDP rank traces)")
def test_plan_ranks_refuses_an_implausible_calibration_as_plan_does():
    # Rank 0's trace ran 21 % longer than the measured untraced run whose power it carries (before the board's
    # fall to idle in gaps was modelled, its calibration needed 665 W of memory/uncore power and was refused so).
    with pytest.raises(gearshift.ModelRefusedError, match=r"the trace's step is not the measured run's step.*\+21\.2 %"):
        gearshift.plan_ranks([str(p) for p in DDP_TRACES])


def test_plan_ranks_refuses_a_negative_switch_latency():
    # Before, any negative switch_latency_ms silently became the GPU's estimate (6 ms on an H200).
    for bad in (-1, -0.5, float("nan")):
        with pytest.raises(ValueError, match="the switch latency must be a number of ms >= 0"):
            gearshift.plan_ranks(["rank0.json.gz", "rank1.json.gz"], switch_latency_ms=bad)


@pytest.mark.skipif(not have_ddp_traces(), reason="needs ../shared/data/traces (DDP rank traces)")
def test_a_gpu_whose_power_limit_the_trace_exceeds_is_refused():
    with pytest.raises(gearshift.TraceError, match="maximum power limit of the a40 spec"):
        gearshift.plan_ranks([str(p) for p in DDP_TRACES], gpu="a40")
    with pytest.raises(ValueError, match="unknown GPU spec 'b300'"):
        gearshift.plan_trace(str(DDP_TRACES[0]), gpu="b300")


@pytest.mark.skipif(not have_ddp_traces(), reason="needs ../shared/data/traces (DDP rank traces)")
def test_sync_slack_over_the_process_group(ranks):
    # calibrate=False: rank 0's calibration to its measured power is refused (ModelRefusedError on every rank).
    out = ranks(lambda dist, rank: gd.plan_data_parallel(str(DDP_TRACES[rank]), dist=dist, calibrate=False), world=2)
    for r in range(2):
        status, value = out[r]
        assert status == "ok", value
        assert value["plan"]["rank"] == r
    assert out[1][1]["report"]["ranks"][1]["saving_pct"] > 3.0
    assert out[0][1]["report"] == out[1][1]["report"]


def test_sync_slack_error_reaches_every_rank(ranks, tmp_path):
    junk = tmp_path / "junk.json"
    junk.write_text("[]")
    out = ranks(lambda dist, rank: gd.plan_data_parallel(str(junk), dist=dist), world=2)
    assert out[0][0] == "error" and out[1][0] == "error"
    assert out[0][1][0] in ("TraceError", "NoIterationError")
