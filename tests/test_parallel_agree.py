"""What a group's ranks must agree on (``parlab.parallel.agree``), in one process: a stand-in
communicator whose other rank passed chosen fields. The live runs (ring attention, the EP, 5D and
pipeline trainers, ZeRO) are in their own test files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from parlab.comm import CollectiveMismatch
from parlab.parallel.agree import _encode, agree, check_loss, check_training, digest, diverging


class TwoRanks:
    """Rank 0 of 2; rank 1 passes ``theirs`` (a dict like the caller's)."""

    world_size, rank = 2, 0

    def __init__(self, theirs: dict | None = None):
        self.theirs, self.gathered = theirs, 0

    def all_gather(self, mine: np.ndarray) -> np.ndarray:
        self.gathered += 1
        other = mine if self.theirs is None else np.array(
            [_encode(k, v) for k, v in self.theirs.items()], np.int64)
        return np.concatenate([mine, other])


def test_the_first_field_that_differs_is_named_with_every_ranks_value():
    mine = {"balanced": True, "heads": 2, "dtype": torch.float32, "lr": 0.1}
    with pytest.raises(CollectiveMismatch, match=r"^f: the ranks disagree on dtype \(rank 0 float32, "
                                                 r"rank 1 bfloat16\); every rank .* same dtype$"):
        agree(TwoRanks(mine | {"dtype": torch.bfloat16, "lr": 0.2}), "f", mine)
    with pytest.raises(CollectiveMismatch, match=r"lr \(rank 0 0.1, rank 1 nan\)"):
        agree(TwoRanks(mine | {"lr": float("nan")}), "f", mine)
    with pytest.raises(CollectiveMismatch, match=r"balanced \(rank 0 True, rank 1 False\)"):
        agree(TwoRanks(mine | {"balanced": False}), "f", mine)
    agree(TwoRanks(), "f", mine)  # the same everywhere: nothing raised
    with pytest.raises(TypeError, match="field 'name' must be a bool, int, float or torch dtype"):
        agree(TwoRanks(), "f", {"name": "ring"})


def test_one_rank_sends_nothing():
    class One:
        world_size, rank = 1, 0

    agree(One(), "f", {"x": 1})  # no all_gather attribute needed


def test_the_digest_sees_values_shapes_and_dtypes():
    x = torch.arange(6).view(2, 3)
    assert digest([x]) == digest([x.clone()]) == digest([x.t().contiguous().t()])
    assert len({digest([x]), digest([x + 1]), digest([x.view(3, 2)]), digest([x.int()])}) == 4
    assert digest([torch.ones(2, dtype=torch.bfloat16)]) != digest([torch.ones(2, dtype=torch.float16)])


def test_training_arguments_are_checked_before_any_step():
    comm, pair = TwoRanks(), (torch.zeros(1, 2, dtype=torch.long),) * 2
    assert check_training(comm, "t", iter([pair] * 5), 3, 0.1) == [pair] * 3  # the first steps
    assert comm.gathered == 1  # one all-gather for steps, lr and the batches
    for steps, lr, match in ((0, 0.1, "t steps must be a positive integer, got 0"),
                             (1.5, 0.1, "t steps must be a positive integer, got 1.5"),
                             (2, float("inf"), "t lr must be a positive number, got inf"),
                             (4, 0.1, r"t: batches holds 3 \(x, y\) pairs but steps=4")):
        with pytest.raises(ValueError, match=match):
            check_training(comm, "t", [pair] * 3, steps, lr)
    with pytest.raises(TypeError, match="batches must be an iterable of"):
        check_training(comm, "t", torch.zeros(3), 1, 0.1)
    with pytest.raises(TypeError, match="batch 0 must be an .x, y. pair"):
        check_training(comm, "t", [pair[0]], 1, 0.1)


def test_a_non_finite_value_stops_training_naming_the_step():
    assert check_loss("t", 1, 2.5) == 2.5
    with pytest.raises(FloatingPointError, match="t: training diverged at step 3: the loss is nan"):
        check_loss("t", 3, float("nan"))
    with pytest.raises(FloatingPointError, match="t: training diverged at step 2: router logits"):
        with diverging("t", 2):
            raise FloatingPointError("router logits must be finite")
