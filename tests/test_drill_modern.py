"""The drill cards on today's models (parlab.drill.modern: GQA, FP8, uneven stages): the answers
are the published layouts' numbers by hand, and each card reads back its own answer in both
languages (the Chinese twins' numbers are checked with the whole bank in tests/test_zh.py)."""

import pytest

from parlab.costmodel import get_model
from parlab.costmodel.pricing.pipeline_split import pipeline_layout
from parlab.drill import BANK, Quiz
from parlab.drill.modern import QUESTIONS


def test_the_three_cards_are_in_the_guides_bank_under_their_nearest_questions():
    assert [(q.key, q.section) for q in QUESTIONS] == [
        ("gen-gqa-kv-cache", "4.1"), ("gen-fp8-weights", "1.21"), ("gen-uneven-stages", "1.6")]
    assert set(QUESTIONS) <= set(BANK)


def test_llama_3_405b_on_pp_16_is_7_8_x_14_7():
    # Dubey et al. 2024, Sec. 3.3.2: one layer fewer on the first and the last stage
    assert pipeline_layout(126, 16, embedding=True, loss=True) == (7,) + (8,) * 14 + (7,)
    card = next(c for c in (QUESTIONS[2].pose(s) for s in range(40))
                if c.params == {"model": "llama-3.1-405b", "pp": 16})
    assert card.answer == 7


def test_gqa_cache_is_kv_heads_over_heads_of_mha():
    m = get_model("llama-3.1-8b")
    for seed in range(30):
        card = QUESTIONS[0].pose(seed)
        if card.params["model"] == "llama-3.1-8b":
            assert card.answer == 2 * 32 * 8 * 128 * 2 * card.params["tokens"]  # 128 KiB per token
            assert f"({m.heads // m.kv_heads}x)" in card.explanation
            return
    pytest.fail("no llama-3.1-8b card in 30 seeds")


def test_fp8_adds_two_bytes_per_linear_weight_and_a_little_for_scales():
    for seed in range(4):
        card = QUESTIONS[1].pose(seed)
        m = get_model(card.params["model"])
        linear = (m.num_params() - 2 * m.vocab * m.hidden) / card.params["tp"]
        assert 2 * linear * 0.99 < card.answer < 2 * linear * 1.02, card.params


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_card_accepts_its_computed_answer(lang):
    quiz = Quiz(bank=tuple(QUESTIONS), seed=2, lang=lang)
    for _ in range(len(quiz)):
        card = quiz.next()
        assert quiz.answer(card.expected.split(" (")[0]).correct, card.key
