"""Checker for exercise 12 (interview drill): the learner's functions answer seeded drill cards,
and each answer is judged by the drill bank's own ``Card.check`` (the same code as the quiz).

Each function answers one generated question of ``parlab.drill``: it is called with the card's
random parameters (``card.params``) as keyword arguments and returns a plain number in base
units (bytes, seconds, a fraction, a count), which is typed into ``check`` with that unit."""

from __future__ import annotations

import numbers
import random
from collections.abc import Callable
from fractions import Fraction

from parlab.drill import Quiz, get
from parlab.drill.questions import Card, Result, wrap

from .stub import refuse_stubs

#: drill question key -> the name of the function that answers it (in the exercise's order)
FUNCTIONS: dict[str, str] = {
    "gen-states": "model_state_bytes",
    "gen-zero-stage": "zero_state_bytes",
    "gen-ring-time": "ring_all_reduce_seconds",
    "gen-bubble": "bubble_fraction",
    "gen-in-flight": "micro_batches_in_flight",
    "gen-rank": "global_rank",
}
#: the unit a function's number is in, per the card's dimension
BASE_UNITS = {"bytes": "B", "seconds": "s", "rate": "B/s", "count": "", "fraction": "", "ratio": "",
              "bytes/param": ""}
ROUND_SIZE = 10


def round_cards(seed: int = 0, n: int = ROUND_SIZE) -> list[Card]:
    """The exercise's round: ``n`` cards drawn by a seeded ``Quiz`` from the questions of
    ``FUNCTIONS`` (each question at least once in a round of 6 or more)."""
    quiz = Quiz(bank=[get(k) for k in FUNCTIONS], seed=seed)
    return [quiz.next() for _ in range(n)]


def _function_for(card: Card, functions: dict[str, Callable]) -> Callable:
    return functions[FUNCTIONS[card.key]]


def as_typed(value: object, card: Card) -> str:
    """A function's number as the text typed into ``card.check``: its value in the base unit
    ('1.12e+11 B', '0.07 s', '0.2727'). AssertionError when it is not a number."""
    name = FUNCTIONS[card.key]
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Fraction):
        raise AssertionError(f"{name}(...) returned {value!r} ({type(value).__name__}); return a number "
                             f"in {BASE_UNITS[card.dimension] or 'plain units'}")
    return f"{float(value)!r} {BASE_UNITS[card.dimension]}".strip()


def answer(card: Card, functions: dict[str, Callable]) -> tuple[str, Result]:
    """(what was typed, the card's verdict) for the learner's function answering ``card``."""
    typed = as_typed(_function_for(card, functions)(**card.params), card)
    return typed, card.check(typed)


def by_name(fns: tuple[Callable, ...]) -> dict[str, Callable]:
    """The learner's functions by their names; AssertionError naming any that is missing."""
    functions = {getattr(f, "__name__", ""): f for f in fns}
    missing = [n for n in FUNCTIONS.values() if n not in functions]
    if missing:
        raise AssertionError(f"pass all {len(FUNCTIONS)} functions; missing: {', '.join(missing)}")
    return functions


def play_round(*fns: Callable, seed: int = 0, n: int = ROUND_SIZE, width: int = 100) -> str:
    """The round as text: for each card, the learner's call, what it typed, and the verdict."""
    functions, lines = by_name(fns), []
    for i, card in enumerate(round_cards(seed, n), 1):
        typed, result = answer(card, functions)
        lines.append(wrap(f"{i:2d}. guide {card.section}: {FUNCTIONS[card.key]}({_params(card)})", width))
        lines.append(wrap(f"    typed {typed!r}: {result.message}", width))
    return "\n".join(lines)


def _params(card: Card) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in card.params.items())


def check_drill_answers(*fns: Callable, seed: int = 0, more: int = 12) -> None:
    """Answer the round (``round_cards(seed)``) and ``more`` further seeded cards of every
    question with the learner's functions (passed in any order, found by name, see
    ``FUNCTIONS``); each answer must be judged correct by the card's own ``check``. Raises
    AssertionError naming the first card answered wrong: the function, its arguments, what it
    returned and the card's verdict. A stub fails at once (``StillAStub``)."""
    refuse_stubs(*fns)
    functions = by_name(fns)
    rng = random.Random(seed)
    cards = round_cards(seed) + [get(k).pose(rng.randrange(2**31)) for k in FUNCTIONS for _ in range(more)]
    for card in cards:
        typed, result = answer(card, functions)
        assert result.readable, f"{FUNCTIONS[card.key]}({_params(card)}) typed {typed!r}: {result.message}"
        assert result.correct, (
            f"{FUNCTIONS[card.key]}({_params(card)}) returned {typed} -- {result.message} "
            f"(card {card.key}, guide {card.section}, within {card.rtol:.0%})")
    print(f"All {len(cards)} drill cards answered right ({ROUND_SIZE} of the round, {more} more of each "
          f"of the {len(FUNCTIONS)} questions),\nas judged by each card's own check().")
