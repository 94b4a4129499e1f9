"""The exercise 08 checker: a correct rank_groups passes every rank of 66 grids; a stub, another
order (picotron's dp-pp-tp view), a group without the rank, or a shuffled group are each named."""

import pytest

from parlab.checks.grid import GRIDS, check_rank_groups
from parlab.layout import Grid


def megatron(rank, dp, tp, pp):
    t, d, p = rank % tp, (rank // tp) % dp, rank // (tp * dp)
    return {"tp": [i + tp * (d + dp * p) for i in range(tp)],
            "dp": [t + tp * (i + dp * p) for i in range(dp)],
            "pp": [t + tp * (d + dp * i) for i in range(pp)]}


def picotron(rank, dp, tp, pp):  # world.view(dp, pp, tp): tp fastest, then pp, then dp
    t, p, d = rank % tp, (rank // tp) % pp, rank // (tp * pp)
    return {"tp": [i + tp * (p + pp * d) for i in range(tp)],
            "dp": [t + tp * (p + pp * i) for i in range(dp)],
            "pp": [t + tp * (i + pp * d) for i in range(pp)]}


def stub(rank, dp, tp, pp):
    raise NotImplementedError("write rank_groups")


def test_the_checker_covers_many_grids_including_the_guides():
    assert len(GRIDS) == 66 and Grid(dp=2, tp=4, pp=4) in GRIDS


def test_a_correct_answer_passes(capsys):
    check_rank_groups(megatron)
    assert "correct for all 1,592 ranks of 66 grids" in capsys.readouterr().out


@pytest.mark.parametrize("fn, message", [
    (stub, "write rank_groups"),
    (picotron, "groups of the tp-pp-dp order"),
    (lambda r, dp, tp, pp: {**megatron(r, dp, tp, pp), "dp": [r]}, "the dp group has 1 rank; a dp group has dp=2"),
    (lambda r, dp, tp, pp: {**megatron(r, dp, tp, pp), "pp": [x + 1 for x in megatron(r, dp, tp, pp)["pp"]]},
     "does not contain rank 0 itself"),
    (lambda r, dp, tp, pp: {**megatron(r, dp, tp, pp), "tp": megatron(r, dp, tp, pp)["tp"][::-1]},
     "right ranks in the wrong order"),
    (lambda r, dp, tp, pp: [r], "must return a dict with keys"),
])
def test_wrong_answers_are_named(fn, message):
    with pytest.raises((AssertionError, NotImplementedError), match=message):
        check_rank_groups(fn)
