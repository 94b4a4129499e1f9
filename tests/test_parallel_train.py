"""The 3D trainer (``parlab.parallel.trainer``): the tiny GPT trained on 8 processes as
dp x tp x pp = 2 x 2 x 2 (1F1B over the pipeline, Megatron TP inside each stage, gradient
all-reduce over DP) gives the loss curve of single-process training on the same data, on both
backends, and every rank holds and sends exactly what the cost model predicts for it.

Tolerance: float32; the 3D run sums partial results in another order (TP all-reduces, m
micro-batch gradients, the DP average), so the losses differ by rounding only: |loss - serial|
<= 1e-5 per step (measured: 2.4e-7 on both backends). Bytes: equal (the local backend counts
what its algorithms move; the torch backend reports ring traffic, nominally, which for groups
of 2 is the same). One launch per backend, shared by the checks (the suite's one 8-rank run).
Other schedules, ZeRO-1 and other layouts run in tests/test_checkpoint.py (4 ranks).
"""

from __future__ import annotations

import pytest

from parlab.comm import launch
from parlab.parallel.model import GPTConfig
from parlab.parallel.trainer import (
    StepLog,
    TrainPlan,
    pipeline_timeline,
    serial_losses,
    summary_table,
    train_3d,
)
from parlab.parallel.trainer.predict import predicted_params

CFG = GPTConfig(n_layer=2, hidden=32, n_head=4, seq_len=16)
PLAN = TrainPlan(dp=2, tp=2, pp=2, batch_size=8, micro_batches=2, schedule="1f1b")
STEPS = 3
LOSS_TOL = 1e-5


@pytest.fixture(scope="module", params=["local", "torch"])
def reports(request):
    return launch(train_3d, PLAN.world, CFG, PLAN, STEPS, backend=request.param, timeout=120)


@pytest.fixture(scope="module")
def serial():
    return serial_losses(CFG, PLAN, STEPS)


def test_loss_curve_equals_single_process_training(reports, serial):
    for r in reports:
        assert len(r.losses) == STEPS
        assert r.losses == reports[0].losses  # the global loss, on every rank
    assert max(abs(a - b) for a, b in zip(reports[0].losses, serial, strict=True)) <= LOSS_TOL
    assert serial[-1] < serial[0]  # it trains


def test_every_rank_has_its_coordinates(reports):
    assert sorted(r.coords for r in reports) == sorted(
        (tp, dp, pp) for tp in range(2) for dp in range(2) for pp in range(2))
    for r in reports:  # TP innermost, then DP, then PP (Megatron-LM's order)
        tp, dp, pp = r.coords
        assert r.rank == tp + 2 * (dp + 2 * pp)


def test_measured_traffic_and_memory_equal_the_cost_model(reports):
    for r in reports:
        assert r.measured["traffic"] == r.predicted["traffic"]
        for term in ("parameters", "gradients", "optimizer states", "micro-batches in flight"):
            assert r.measured["memory"][term] == r.predicted["memory"][term], (r.rank, term)
        assert r.measured["memory"]["activations (peak)"] > 0
        groups = r.measured["traffic"]
        assert set(groups["tp"]) == {"all_reduce"} and groups["tp"]["all_reduce"] > 0
        assert set(groups["dp"]) == {"all_reduce"}
        assert groups["pp"]["p2p"] > 0


def test_parameters_split_over_tp_and_pp():
    whole = predicted_params(CFG, tp=1, pp=1, v=1, pp_rank=0)
    parts = sum(predicted_params(CFG, tp=2, pp=2, v=1, pp_rank=s) for s in range(2))
    # the tied embedding is held twice (first and last stage), LayerNorms/biases by every TP rank
    assert whole / 2 < parts < whole


def test_step_log_line_names_loss_throughput_and_phases(reports):
    log = reports[0].logs[-1]
    assert isinstance(log, StepLog) and log.step == STEPS and log.tokens_per_s > 0
    assert set(log.phases) == {"pipeline", "tied embedding", "dp all-reduce", "optimizer", "checkpoint"}
    line = log.line()
    assert line.startswith(f"step {STEPS} loss ") and "tok/s" in line and "pipeline" in line


def test_the_measured_pipeline_timeline_has_every_op(reports):
    tl = pipeline_timeline(PLAN, reports, tp=1, dp=1)
    schedule = PLAN.make_schedule()
    assert [len(spans) for spans in tl.spans] == [len(ops) for ops in schedule.stages]


def test_summary_table_shows_measured_beside_predicted():
    rows = [{"rank": 0, "tp": 0, "dp": 0, "pp": 0, "parameters": (10.0, 10.0), "optimizer": (20.0, 20.0),
             "in flight": (2.0, 2.0), "TP sent": (3.0, 3.0), "PP sent": (4.0, 4.0), "DP sent": (5.0, 5.0)}]
    text = summary_table(rows, "torch")
    assert "measured / predicted" in text and "nominal" in text and "10 / 10" in text


@pytest.mark.parametrize("kwargs, world, rule", [
    ({"dp": 2, "tp": 2, "pp": 2}, 4, "world"),
    ({"dp": 3}, None, "batch_size=8 must be divisible by dp=3"),
    ({"dp": 2, "micro_batches": 3}, None, "micro-batches"),
    ({"tp": 8}, None, "tensor-parallel degree tp=8 must divide n_head=4"),
    ({"pp": 4}, None, "more pipeline pieces than layers"),
])
def test_bad_plans_raise_naming_the_rule(kwargs, world, rule):
    with pytest.raises(ValueError, match=rule):
        TrainPlan(**kwargs).check(CFG, world)


def test_bad_plan_fields():
    with pytest.raises(ValueError, match="schedule must be one of"):
        TrainPlan(schedule="pipedream")
    with pytest.raises(ValueError, match="TrainPlan.dp"):
        TrainPlan(dp=0)
    with pytest.raises(ValueError, match="dropout=0"):
        TrainPlan().check(GPTConfig(dropout=0.1))
