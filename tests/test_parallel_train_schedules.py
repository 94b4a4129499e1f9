"""Every schedule the trainer accepts (``parlab.schedules.SCHEDULES``) on a tiny 1 x 2 x 2 run:
each rank sends and holds exactly what ``trainer.predict`` says, byte for byte, on the local
backend, and the loss is serial training's. ZB-H1 splits the backward into B and W over one
graph; W must not repeat TP's backward all-reduces (issue 20: ranks 2-3 sent 527,360 TP bytes
where 330,752 are predicted). One warm 4-rank World, one one-step run per schedule."""

from __future__ import annotations

import pytest

from parlab.comm import World
from parlab.parallel.model import GPTConfig
from parlab.parallel.trainer import TrainPlan, serial_losses, train_3d
from parlab.schedules import SCHEDULES

CFG = GPTConfig(n_layer=4, hidden=32, n_head=4, seq_len=16)  # 4 layers: interleaved, 2 chunks x 2
LOSS_TOL = 1e-5  # float32, another summation order (as tests/test_parallel_train.py)


@pytest.fixture(scope="module")
def world4():
    with World(4, backend="local", timeout=120) as world:
        yield world


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_schedule_sends_what_the_cost_model_predicts(world4, schedule):
    plan = TrainPlan(dp=1, tp=2, pp=2, batch_size=4, micro_batches=2, schedule=schedule, chunks=2)
    reports = world4.run(train_3d, CFG, plan, 1)
    for r in reports:
        assert r.measured["traffic"] == r.predicted["traffic"], (schedule, r.rank)
        for term in ("parameters", "micro-batches in flight"):
            assert r.measured["memory"][term] == r.predicted["memory"][term], (schedule, r.rank, term)
    assert abs(reports[0].losses[0] - serial_losses(CFG, plan, 1)[0]) <= LOSS_TOL
