"""gearshift.pipeline driven by a fake 1F1B schedule and a stand-in for Megatron-Core's schedules module."""

import types

import pytest

import gearshift
import gearshift.pipeline as gp


def one_f_one_b(stage, stages, microbatches):
    """(kind, microbatch) in 1F1B order for one stage: warm-up forwards, steady 1F1B, cool-down backwards."""
    warm = min(stages - stage - 1, microbatches)
    order, f, b = [], 0, 0
    for _ in range(warm):
        order.append(("forward", f))
        f += 1
    while f < microbatches:
        order.append(("forward", f))
        f += 1
        order.append(("backward", b))
        b += 1
    while b < microbatches:
        order.append(("backward", b))
        b += 1
    return order


@pytest.fixture(autouse=True)
def _fresh_recorder():
    gp.recorder().clear()
    yield
    gp.recorder().clear()


def test_instruction_records_kind_and_microbatch():
    for kind, mb in one_f_one_b(stage=0, stages=2, microbatches=4):
        with gp.instruction(kind, microbatch=mb):
            pass
    recs = gp.recorder().records
    assert [(r.kind, r.microbatch) for r in recs] == one_f_one_b(0, 2, 4)
    means = gp.recorder().mean_times()
    assert means["forward"][1] == 4 and means["backward"][1] == 4


def test_instruction_rejects_unknown_kind():
    with pytest.raises(ValueError, match="optimizer"):
        with gp.instruction("optimizer"):
            pass


def _fake_megatron():
    calls = []

    def forward_step(forward_step_func, data_iterator, model, num_microbatches, input_tensor, forward_data_store,
                     config, collect_non_loss_data=False, checkpoint_activations_microbatch=None,
                     is_first_microbatch=False, current_microbatch=None):
        calls.append(("forward", current_microbatch))
        return "out"

    def backward_step(input_tensor, output_tensor, output_tensor_grad, model_type, config):
        calls.append(("backward", None))
        return "grad"

    mod = types.SimpleNamespace(forward_step=forward_step, backward_step=backward_step)

    def schedule(stage, stages, microbatches, pass_microbatch):
        # Calls through the module's attributes, as Megatron-Core's schedules call their module globals.
        for kind, mb in one_f_one_b(stage, stages, microbatches):
            if kind == "forward":
                kw = {"current_microbatch": mb} if pass_microbatch else {}
                assert mod.forward_step(None, None, None, microbatches, None, [], None, **kw) == "out"
            else:
                assert mod.backward_step(None, None, None, None, None) == "grad"

    return mod, schedule, calls


@pytest.mark.parametrize("pass_microbatch", [True, False])
def test_patch_megatron_core_wraps_both_call_sites(pass_microbatch):
    mod, schedule, calls = _fake_megatron()
    original = (mod.forward_step, mod.backward_step)
    undo = gp.patch_megatron_core(mod)
    assert gp.patch_megatron_core(mod) is undo  # patching twice is a no-op
    schedule(stage=1, stages=2, microbatches=3, pass_microbatch=pass_microbatch)
    assert len(calls) == 6  # the real functions still ran
    recs = [(r.kind, r.microbatch) for r in gp.recorder().records]
    assert recs == one_f_one_b(1, 2, 3)
    undo()
    assert (mod.forward_step, mod.backward_step) == original


def test_patch_without_megatron_raises_import_error():
    with pytest.raises(ImportError):
        gp.patch_megatron_core()


def _sweep_rows(stage, fwd_s, bwd_s):
    # A measured-looking sweep: time ∝ 1/f above a memory floor, power grows with f.
    rows = []
    for f in (1980, 1700, 1400, 1100):
        for kind, t0 in (("forward", fwd_s), ("backward", bwd_s)):
            t = t0 * (0.3 + 0.7 * 1980 / f)
            p = 150 + 550 * (f / 1980) ** 2
            rows.append(f"{stage},{kind},{f},{t:.6f},{t * p:.6f},8")
    return rows


def test_profile_rows_and_pipeline_plan():
    for kind, mb in one_f_one_b(0, 2, 4):
        with gp.instruction(kind, microbatch=mb):
            pass
    rows = gp.recorder().profile_rows(stage=0, sm_clock_mhz=1980, power_w=500.0)
    assert len(rows) == 2 and rows[0].startswith("0,forward,1980,")
    t, e = map(float, rows[0].split(",")[3:5])
    assert e == pytest.approx(500.0 * t)
    text = gp.PROFILE_HEADER + "\n".join(_sweep_rows(0, 0.020, 0.040) + _sweep_rows(1, 0.030, 0.060)) + "\n"
    res = gp.plan(text, stages=2, microbatches=4, straggler=1.2)
    s = res["summary"]
    assert s["t_min_s"] > 0
    straggler = gp.rank_schedule(res, 0, "straggler")
    fastest = gp.rank_schedule(res, 0, "no_slowdown")
    assert len(straggler["instructions"]) == 8  # 4 forwards + 4 backwards on stage 0
    assert straggler["deadline_s"] == pytest.approx(1.2 * fastest["deadline_s"], rel=0.05)
    slow = sum(i["sm_clock_mhz"] for i in straggler["instructions"])
    fast = sum(i["sm_clock_mhz"] for i in fastest["instructions"])
    assert slow < fast  # a later deadline lowers clocks


def test_profile_without_backward_raises_profile_error():
    with gp.instruction("forward", 0):
        pass
    with pytest.raises(gearshift.ProfileError):
        gp.recorder().profile_rows(0, 1980, 400.0)
    with pytest.raises(gearshift.ProfileError):
        gp.plan("stage,instruction,frequency,time,energy\n0,forward,1980,0.1,10\n", stages=2, microbatches=4)
