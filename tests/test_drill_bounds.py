"""The drill's checker never raises and never hangs, whatever is typed (F20 of the attack review):
an answer is bounded before it is read (its length, a number's exponent), a division by zero or a
value past the double range is "not a number I can check" in the card's language, and what was
typed is echoed cut short. Property: ``check`` returns a Result, quickly, for any text."""

from __future__ import annotations

import string
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parlab.drill import BANK, BEYOND, Quiz, Result, Unreadable, get, read_number
from parlab.drill.parse import MAX_ANSWER, MAX_EXPONENT, UNCHECKABLE, Uncheckable
from parlab.drill.zh.translate import UNCHECKABLE_ZH, translate

CPU_S = 10.0  # CPU seconds one check may take (it takes microseconds; '1e99999999/3' took minutes)
MESSAGE = 600  # characters a message may have (the 10 MB answer was echoed whole)


def cards():
    """A number card (GB), a fraction card, a name card and a choice card, in English and in Chinese."""
    keys = ("gen-states", "gen-bubble", "dp-collective", "pp-what")
    return [make(get(k), 0) for k in keys for make in (lambda q, s: q.pose(s), translate)]


CARDS = cards()


def short_id(value: object) -> str:
    return value[:16] if isinstance(value, str) else type(value).__name__


def checked(card, answer: object) -> Result:
    start = time.process_time()
    result = card.check(answer)
    assert time.process_time() - start < CPU_S, (card.key, str(answer)[:40])
    assert isinstance(result, Result) and len(result.message) < MESSAGE and len(result.given) <= MAX_ANSWER
    return result


@pytest.mark.parametrize("typed, rule", [
    ("1/0", "zero"), ("0/0", "zero"), ("5 / 0.0 GB", "zero"), ("1e99999/3", "exponent"),
    ("1e9999999/3", "exponent"), ("1e99999999/3", "exponent"), ("1e999", "exponent"), ("1x10^99999", "exponent"),
    ("1e400/3", "huge"), ("9e307 TB", "huge"), ("1.5*10^308", "huge"), ("9" * 5000 + "/3", "long"),
    ("9" * 5000, "long"), ("x" * 10_000_000, "long"), (10**5000, "long"),
], ids=short_id)
def test_what_the_review_typed_is_not_a_number_i_can_check_in_either_language(typed, rule):
    en, zh = get("gen-states").pose(0), translate(get("gen-states"), 0)
    with pytest.raises(Uncheckable) as info:
        read_number(typed, "bytes", "GB")
    assert info.value.key == rule
    result = checked(en, typed)
    assert not result.readable and result.message.startswith("Could not read your answer: ")
    assert ("not an answer I can check" if rule == "long" else "not a number I can check; write e.g. ") in result.message
    result = checked(zh, typed)
    assert not result.readable and result.message.startswith("无法识别你的答案：")
    assert ("无法核对这个答案" if rule == "long" else "不是能核对的数字；例如 ") in result.message
    assert "…" in result.message or len(short_id(typed)) < 16  # a long answer is quoted cut short


@pytest.mark.parametrize("typed", ["9" * 5000, "x" * 10_000_000, 10**5000, "²"], ids=short_id)
def test_name_and_choice_cards_bound_what_they_read_too(typed):
    for card in CARDS:
        assert not checked(card, typed).readable  # '²' is a digit to str.isdigit, not to int()
    assert get("pp-what").pose(0).check("٣").readable  # an Arabic-Indic 3 is int()'s 3: option C


def test_an_answer_at_the_limit_is_still_read_and_every_option_fits_under_it():
    card = get("gen-states").pose(0)
    assert checked(card, f"{float(card.answer) / 1e9} GB".ljust(MAX_ANSWER)).correct
    assert checked(card, "1e400 B".replace("400", str(MAX_EXPONENT))).message.find("beyond ±1.8e308") > 0
    longest = max(len(o) for q in [*BANK, *BEYOND] for c in (q.pose(0), translate(q, 0)) for o in c.options)
    assert longest < MAX_ANSWER // 2  # an option's text is an answer (``_check_choice``)


def test_every_uncheckable_rule_is_said_in_chinese_with_the_same_fields():
    fields = {k: {f for _, f, _, _ in string.Formatter().parse(v) if f} for k, v in UNCHECKABLE.items()}
    assert fields == {k: {f for _, f, _, _ in string.Formatter().parse(v) if f} for k, v in UNCHECKABLE_ZH.items()}


def test_a_quiz_without_a_card_echoes_a_huge_integer_cut_short():
    result = Quiz().answer(10**5000)
    assert not result.readable and result.given == "an integer of 5,001 digits"


DIGITS = st.one_of(st.from_regex(r"\A[0-9]{1,12}(\.[0-9]{1,6})?\Z"), st.integers(1, 6000).map(lambda n: "9" * n))
NUMBERISH = st.builds(  # sign, digits, exponent, denominator, unit: the shapes read_number reads
    lambda *parts: "".join(parts), st.sampled_from(["", "-", "+"]), DIGITS,
    st.one_of(st.just(""), st.integers(-10**9, 10**9).map(lambda e: f"e{e}")),
    st.one_of(st.just(""), st.sampled_from(["0", "0.0", "00", "3", "7.5"]), DIGITS).map(lambda d: d and f"/{d}"),
    st.sampled_from(["", " GB", "%", " ms", "x10^9", " B/s", " TB"]))


@settings(max_examples=200)
@given(st.one_of(st.text(max_size=400), NUMBERISH, st.integers(), st.floats()))
def test_check_never_raises_and_returns_quickly_for_anything_typed(typed):
    for card in CARDS:
        result = checked(card, typed)
        assert result.readable or not result.correct
    try:
        value = read_number(typed, "bytes", "GB")
    except Unreadable:
        return
    assert value == value and abs(value) < float("inf")  # a value read is a finite number
