"""A number card's input hint ("e.g. ...", the drill's placeholder) never falls within the card's
tolerance of its answer, nor near it (issue 20: "e.g. 1.25 GB/s" on the 10 GbE card, whose
answer is 1.25 GB/s; "e.g. 2.3x" within the 2% of 2.27 on the A800/V100 card)."""

from __future__ import annotations

import pytest

from parlab.drill import BANK
from parlab.drill.parse import HINTS, example_for, hint_values, too_near

SEEDS = range(12)  # as tests/test_drill.py: generated cards over 12 seeds


def number_cards():
    for q in BANK:
        for seed in SEEDS if q.generated else (0,):
            card = q.pose(seed)
            if card.kind == "number":
                yield card


def test_no_card_hint_lies_within_its_tolerance_of_the_answer():
    cards = list(number_cards())
    assert len(cards) > 20
    for card in cards:
        hint = card.how_to_answer().split("e.g. ")[-1].rstrip(".")
        values = hint_values(hint, card.dimension)
        assert values, (card.key, hint)
        for v in values:
            assert not too_near(v, float(card.answer), card.rtol), (card.key, hint, card.answer)
            assert not card.check(hint.split(" (")[0].split(", ")[0].split(" or ")[0]).correct, card.key


@pytest.mark.parametrize("dimension, answer, rtol, not_first", [
    ("rate", 1.25e9, 0.02, True),  # 10 Gb/s = 1.25 GB/s, the old fixed hint
    ("ratio", 2.27, 0.02, True),  # the A800 / V100 gap
    ("ratio", 10.0, 0.02, False),
])
def test_the_hint_moves_away_from_a_nearby_answer(dimension, answer, rtol, not_first):
    hint = example_for(dimension, answer, rtol)
    assert (hint != HINTS[dimension][0]) is not_first
    assert all(not too_near(v, answer, rtol) for v in hint_values(hint, dimension))


def test_every_hint_is_readable_in_its_dimension():
    for dimension, hints in HINTS.items():
        for hint in hints:
            assert hint_values(hint, dimension), (dimension, hint)


def test_an_unreadable_answer_is_told_the_cards_own_hint():
    card = next(c for c in number_cards() if c.key == "hbm-a800-v100")  # answer 2.27, within 2%
    result = card.check("about one")
    assert not result.readable and "write e.g. " in result.message
    hint = result.message.split("write e.g. ")[-1]
    assert all(not too_near(v, float(card.answer), card.rtol) for v in hint_values(hint, card.dimension))
