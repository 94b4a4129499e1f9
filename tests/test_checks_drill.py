"""The exercise 12 checker: right functions pass, each classic mistake fails with a message naming
the function, its arguments and the card's verdict; a stub's NotImplementedError passes through."""

import pytest

from parlab.checks.drill import (
    FUNCTIONS,
    answer,
    as_typed,
    check_drill_answers,
    play_round,
    round_cards,
)


def model_state_bytes(n_params):
    return 16 * n_params


def zero_state_bytes(n_params, dp, stage):
    weights, grads, optimizer = 2 * n_params, 2 * n_params, 12 * n_params
    return (weights / (dp if stage >= 3 else 1) + grads / (dp if stage >= 2 else 1)
            + optimizer / (dp if stage >= 1 else 1))


def ring_all_reduce_seconds(ranks, nbytes, alpha, bandwidth):
    return 2 * (ranks - 1) * alpha + 2 * (ranks - 1) / ranks * nbytes / bandwidth


def bubble_fraction(schedule, p, m):
    return (p - 1) / (m + p - 1)


def micro_batches_in_flight(p, m, stage):
    return min(p - stage, m)


def global_rank(tp, dp, pp, tp_rank, dp_rank, pp_rank):
    return pp_rank * tp * dp + dp_rank * tp + tp_rank


RIGHT = [model_state_bytes, zero_state_bytes, ring_all_reduce_seconds, bubble_fraction,
         micro_batches_in_flight, global_rank]


def replaced(fn):
    """The right functions with ``fn`` in place of the one of the same name."""
    return [fn if f.__name__ == fn.__name__ else f for f in RIGHT]


def test_the_right_functions_pass_in_any_order(capsys):
    check_drill_answers(*reversed(RIGHT))
    assert "answered right" in capsys.readouterr().out


def test_the_round_is_seeded_and_asks_every_question():
    cards = round_cards(seed=0)
    assert len(cards) == 10 and {c.key for c in cards} == set(FUNCTIONS)
    assert [c.prompt for c in cards] == [c.prompt for c in round_cards(seed=0)]
    assert [c.prompt for c in cards] != [c.prompt for c in round_cards(seed=1)]


def test_answers_are_judged_by_the_cards_own_check():
    functions = {f.__name__: f for f in RIGHT}
    for card in round_cards():
        typed, result = answer(card, functions)
        assert result == card.check(typed) and result.correct


def test_a_stub_fails_with_its_not_implemented_error():
    def bubble_fraction(schedule, p, m):
        raise NotImplementedError("exercise: write this part")

    with pytest.raises(NotImplementedError):
        check_drill_answers(*replaced(bubble_fraction))


def fp32_grads(n_params):
    return 18 * n_params


def in_gb(n_params):
    return 16 * n_params / 1e9


def no_factor_two(ranks, nbytes, alpha, bandwidth):
    return (ranks - 1) * alpha + (ranks - 1) / ranks * nbytes / bandwidth


def bubble_over_m(schedule, p, m):
    return (p - 1) / m


def no_min(p, m, stage):
    return p - stage


def stage2_keeps_grads(n_params, dp, stage):
    return zero_state_bytes(n_params, dp, min(stage, 1) if stage == 2 else stage)


def dp_fastest(tp, dp, pp, tp_rank, dp_rank, pp_rank):
    return pp_rank * tp * dp + tp_rank * dp + dp_rank


@pytest.mark.parametrize("wrong,name", [
    (fp32_grads, "model_state_bytes"), (in_gb, "model_state_bytes"),
    (no_factor_two, "ring_all_reduce_seconds"), (bubble_over_m, "bubble_fraction"),
    (no_min, "micro_batches_in_flight"), (stage2_keeps_grads, "zero_state_bytes"),
    (dp_fastest, "global_rank")])
def test_each_classic_mistake_fails_naming_the_function_and_the_verdict(wrong, name):
    wrong.__name__ = name
    with pytest.raises(AssertionError) as err:
        check_drill_answers(*replaced(wrong))
    message = str(err.value)
    assert message.startswith(f"{name}(") and "Not quite: the answer is" in message


def test_a_non_number_is_a_clear_message():
    def global_rank(tp, dp, pp, tp_rank, dp_rank, pp_rank):
        return "seven"

    with pytest.raises(AssertionError, match=r"global_rank\(\.\.\.\) returned 'seven' \(str\); return a number"):
        check_drill_answers(*replaced(global_rank))
    card = next(c for c in round_cards() if c.key == "gen-states")
    with pytest.raises(AssertionError, match="returned None"):
        as_typed(None, card)


def test_a_missing_function_is_named():
    with pytest.raises(AssertionError, match="missing: global_rank"):
        check_drill_answers(*RIGHT[:-1])


def test_the_printed_round_shows_cards_and_verdicts_in_short_lines():
    text = play_round(*RIGHT)
    assert text.count("Correct.") == 10 and "bubble_fraction(schedule=" in text and all(len(line) <= 110 for line in text.splitlines())
