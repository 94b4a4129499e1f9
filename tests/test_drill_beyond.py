"""The drill cards beyond the guide (parlab.drill.BEYOND: ring attention, Ulysses, EP all-to-all,
capacity factor, DualPipe): each answer is parlab's own function of the card's parameters, every
card reads back its own answer, points to chapter 13, and has a Chinese twin whose numbers are the
English card's."""

import pytest

from parlab.costmodel import get_model
from parlab.costmodel.pricing.context_parallel import ring_attention_bytes, ulysses_bytes
from parlab.costmodel.pricing.expert_parallel import all_to_all_bytes_per_layer
from parlab.costmodel.specs.moe import MoESpec, expert_capacity
from parlab.drill import BANK, BEYOND, Quiz
from parlab.drill.zh import tokens
from parlab.drill.zh.drill_beyond import ZH_BEYOND
from parlab.drill.zh.translate import _english_parts, translate
from parlab.schedules import simulate
from parlab.schedules.dualpipe import dualpipe
from parlab.zh.answers import NAMES


def recomputed(key: str, p: dict) -> object:
    if key == "gen-ring-kv":
        m = get_model(p["model"])
        return ring_attention_bytes(p["micro_batch"], p["seq_len"], m.hidden, p["cp"], m.heads).forward
    if key == "gen-ulysses":
        m = get_model(p["model"])
        return ulysses_bytes(1, p["seq_len"], m.hidden, p["cp"], m.heads).forward
    if key == "gen-ep-all-to-all":
        moe = MoESpec(p["experts"], p["top_k"], 2048)
        return all_to_all_bytes_per_layer(p["tokens"], p["hidden"], moe, p["ep"])
    if key == "gen-capacity":
        return expert_capacity(p["tokens"], MoESpec(p["experts"], p["top_k"], 1024, capacity_factor=p["capacity_factor"]))
    assert key == "gen-dualpipe"
    return simulate(dualpipe(p["p"], p["m"])).bubble_fraction


def test_the_five_topics_are_there_and_not_in_the_guides_bank():
    assert [q.key for q in BEYOND] == ["gen-ring-kv", "gen-ulysses", "gen-ep-all-to-all", "gen-capacity",
                                       "gen-dualpipe"]
    assert not {q.key for q in BEYOND} & {q.key for q in BANK}
    assert all(q.beyond and q.generated for q in BEYOND)


@pytest.mark.parametrize("question", BEYOND, ids=lambda q: q.key)
def test_each_answer_is_parlabs_function_of_the_cards_parameters(question):
    for seed in range(4):
        card = question.pose(seed)
        assert card.answer == recomputed(question.key, card.params)
        assert card.check(card.expected.split(" (")[0]).correct
        assert "Beyond the guide (nearest: guide 1.16" in card.explanation and "chapter 13" in card.explanation


def test_the_answers_are_the_papers_numbers_by_hand():
    # ring: 7 sends of K and V for 8192 tokens x 4096, 2 bytes; Switch Eq. 3: ceil(1.25 x 4096 x 2 / 8)
    assert ring_attention_bytes(1, 65536, 4096, 8, 32).forward == 7 * 2 * 8192 * 4096 * 2
    assert expert_capacity(4096, MoESpec(8, 2, 1024, capacity_factor=1.25)) == 1280
    assert simulate(dualpipe(4, 8)).bubble_fraction < 3 / 11  # 1F1B's (p - 1)/(m + p - 1)


@pytest.mark.parametrize("question", BEYOND, ids=lambda q: q.key)
def test_the_chinese_twin_shows_the_english_numbers_and_types_none(question):
    zh = ZH_BEYOND[question.key]
    for seed in (0, 1, 2):
        prompt, working = _english_parts(question, seed)
        for name, template, english, all_of_them in (("prompt", zh["p"], prompt, True), ("why", zh["y"], question.why, False),
                                                     ("working", zh["k"], working, True)):
            assert tokens.stray_digits(template, NAMES) == [], f"{question.key} {name}: a typed number"
            used, have = set(tokens.slots(template)), set(range(len(tokens.numbers(english))))
            assert used <= have and (used == have or not all_of_them), (question.key, name)
        card = translate(question, seed)
        assert card.answer == question.pose(seed).answer and "第 13 章" in card.explanation
    assert set(ZH_BEYOND) == {q.key for q in BEYOND}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_quiz_over_the_cards_beyond_the_guide_scores_them_all(lang):
    quiz = Quiz(bank=BEYOND, seed=5, lang=lang)
    for _ in range(len(quiz)):
        card = quiz.next()
        assert quiz.answer(card.expected.split(" (")[0]).correct, card.key
    assert quiz.score.correct == len(BEYOND)
    assert len(Quiz(bank=BEYOND, topics="expert parallel")) == 2
