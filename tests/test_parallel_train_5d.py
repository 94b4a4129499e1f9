"""5D (parlab.parallel.trainer.five_d): the MoE TinyGPT trained on dp x tp x pp x cp x ep =
2 x 2 x 2 x 2 x 2 (16 ranks; experts over 2 of the dp x cp ranks) gives the serial model's loss
at every step (two SGD steps), to float rounding (atol 1e-5; measured about 1e-7)."""

from __future__ import annotations

import pytest

from parlab.comm import launch
from parlab.costmodel.specs.moe import MoESpec
from parlab.layout import Grid
from parlab.parallel import GPTConfig, batches, train_reference
from parlab.parallel.expert_parallel import MoEGPT
from parlab.parallel.trainer.five_d import train_5d

pytestmark = pytest.mark.usefixtures("warm_launches")  # launch runs on warm ranks (conftest)

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
