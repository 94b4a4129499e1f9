"""5D (parlab.parallel.trainer.five_d): the MoE TinyGPT trained on dp x tp x pp x cp x ep =
2 x 2 x 2 x 2 x 2 (16 ranks; experts over 2 of the dp x cp ranks) gives the serial model's loss
at every step (two SGD steps), to float rounding (atol 1e-5; measured about 1e-7)."""

from __future__ import annotations

import sys

import cloudpickle
import pytest
import torch

from parlab.comm import launch
from parlab.costmodel.specs.moe import MoESpec
from parlab.layout import Grid
from parlab.parallel import GPTConfig, batches, train_reference
from parlab.parallel.expert_parallel import MoEGPT
from parlab.parallel.trainer.five_d import train_5d

pytestmark = pytest.mark.usefixtures("warm_launches")  # launch runs on warm ranks (conftest)
cloudpickle.register_pickle_by_value(sys.modules[__name__])

CFG = GPTConfig(n_layer=2, hidden=16, n_head=2, seq_len=8)
SPEC = MoESpec(4, 2, 16, gated=False, bias=True)  # dropless: outputs independent of routing groups


def test_a_5d_run_equals_the_serial_losses():
    grid = Grid(dp=2, tp=2, pp=2, cp=2, ep=2)
    data = [b for _, b in zip(range(2), batches(4, CFG.seq_len, seed=1), strict=False)]
    ref = train_reference(MoEGPT(CFG, SPEC, aux_loss_coef=0.0), iter(data), 2, lr=0.1, optimizer="sgd")
    runs = launch(train_5d, grid.world, CFG, SPEC, grid, data, 2, timeout=300)
    for losses in runs:  # every rank reports the global loss
        assert losses == pytest.approx(ref, abs=1e-5)
    assert ref[1] < ref[0]


def test_5d_refuses_a_capacity_bound_moe_before_any_message():
    from parlab.parallel.trainer.five_d import build_model

    with pytest.raises(ValueError, match="dropless experts"):
        build_model(CFG, MoESpec(4, 2, 16, capacity_factor=1.0, gated=False, bias=True), Grid(), {}, 0)


def _refusals(comm) -> dict[str, str]:
    """train_5d's refusals on a 2-stage pipeline (Grid(pp=2), 2 ranks): the error of each case."""
    from parlab.schedules import one_f_one_b

    grid = Grid(pp=2)
    data = [b for _, b in zip(range(3), batches(2, CFG.seq_len, seed=1), strict=False)]
    mine = [next(batches(2, CFG.seq_len, seed=10 + comm.rank))] + data[1:]  # rank r's own first batch

    def error(**kwargs) -> str:
        args = {"batches": data, "steps": 2} | kwargs
        try:
            train_5d(comm, CFG, SPEC, grid, **args)
        except Exception as err:  # noqa: BLE001 - the class and message are what the test reads
            return f"{type(err).__name__}: {err}"
        return "nothing"

    return {"steps=-1": error(steps=-1), "lr=nan": error(lr=float("nan")), "lr=inf": error(lr=float("inf")),
            "lr=-1": error(lr=-1.0), "2 batches, steps=3": error(batches=data[:2], steps=3),
            "per-rank batches": error(batches=mine), "1F1B for p=4": error(schedule=one_f_one_b(4, 2)),
            "1F1B m=3": error(schedule=one_f_one_b(2, 3))}


def test_5d_refuses_bad_arguments_and_ranks_with_different_batches_in_one_line():
    """F9: steps, lr, too few batches, per-rank batches and a schedule for another depth refused
    before any step, every rank raising the same error (the run goes on after each)."""
    for res in launch(_refusals, 2):
        assert res["steps=-1"] == "ValueError: train_5d steps must be a positive integer, got -1"
        for lr in ("nan", "inf", "-1"):
            assert res[f"lr={lr}"].startswith("ValueError: train_5d lr must be a positive number"), res
        assert res["2 batches, steps=3"] == ("ValueError: train_5d: batches holds 2 (x, y) pairs but "
                                             "steps=3: one batch per step")
        assert res["per-rank batches"].startswith("CollectiveMismatch: train_5d: the ranks disagree on "
                                                  "batches (CRC-32) (rank 0 "), res
        assert "schedule for the grid's pp=2 stages, got p=4" in res["1F1B for p=4"]
        assert "the batch size (2) must be a multiple of m=3" in res["1F1B m=3"]  # a DP block of 2


def test_a_diverging_5d_run_stops_at_its_first_non_finite_value_naming_the_step():
    """F9: lr=1e30 (NaN weights after step 1) ends the run with one line naming the step; the
    stage that meets the nan first raises it (the other stage's peer is gone)."""
    data = [b for _, b in zip(range(3), batches(2, CFG.seq_len, seed=1), strict=False)]
    with pytest.raises(Exception, match=r"rank \d raised FloatingPointError: train_5d: training diverged "
                                        r"at step [23]: .*(nan|inf)"):
        launch(train_5d, 2, CFG, SPEC, Grid(pp=2), data, 3, None, 1e30)


def test_the_executor_refuses_a_schedule_for_another_pipeline_depth():
    """F9: run_schedule with a 4-stage schedule on a 2-rank pipeline names both (it raised
    "'<' not supported between 'NoneType' and 'int'" before), before any message."""
    from parlab.parallel.pipeline_parallel.executor import run_schedule
    from parlab.schedules import one_f_one_b

    class TwoRanks:
        world_size, rank = 2, 0

    x = torch.zeros(2, CFG.seq_len, dtype=torch.long)
    with pytest.raises(ValueError, match=r"has p=4 stages but the pipeline has 2 ranks"):
        run_schedule(TwoRanks(), one_f_one_b(4, 2), None, [], x, x)
