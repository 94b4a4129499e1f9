"""The interview drill: the bank covers the guide, every answer checks, generated answers are
parlab's own numbers, learner input is read robustly, and a quiz filters and keeps score."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from parlab import costmodel as cm
from parlab import schedules
from parlab.costmodel.answers.phases import one_gpu_walk
from parlab.costmodel.answers.walls import compute_wall, memory_wall
from parlab.course import CHAPTERS, GUIDE_QUESTIONS
from parlab.drill import (
    BANK,
    SECTIONS,
    TITLES,
    TOPICS,
    Quiz,
    count_by_section,
    get,
    guide_titles,
    read_number,
    select,
    title,
)
from parlab.drill import titles as titles_module
from parlab.drill.parse import Unreadable, unit_factor
from parlab.drill.questions import LETTERS, Card

SEEDS = range(12)


def right_answer(card: Card) -> str:
    if card.kind == "choice":
        return LETTERS[card.answer]
    if card.kind == "name":
        return card.answer
    return f"{float(card.answer) / unit_factor(card.dimension, card.unit)!r} {card.unit}"


def wrong_answer(card: Card) -> str:
    if card.kind == "choice":
        return LETTERS[(card.answer + 1) % len(card.options)]
    if card.kind == "name":
        return next(o for o in card.options if o != card.answer)
    value = float(card.answer) / unit_factor(card.dimension, card.unit)
    return f"{value * 1.5 + 1!r} {card.unit}"


# -- coverage ---------------------------------------------------------------------------------------
def test_the_bank_has_at_least_80_questions_with_unique_keys():
    assert len(BANK) >= 80
    assert len({q.key for q in BANK}) == len(BANK)


def test_every_guide_section_has_a_question():
    assert list(SECTIONS) == list(GUIDE_QUESTIONS)
    counts = count_by_section()
    assert [s for s, n in counts.items() if n == 0] == []
    assert sum(counts.values()) == len(BANK)


def test_every_question_has_a_known_topic_and_the_bank_has_every_kind():
    assert {q.topic for q in BANK} <= set(TOPICS)
    assert {q.kind for q in BANK} == {"choice", "name", "number"}
    assert sum(q.generated for q in BANK) >= 15


def test_stored_titles_are_the_guide_headings():
    found = guide_titles()
    if not found:
        pytest.skip("the guide is not beside this checkout")
    assert found == TITLES


def test_titles_work_without_the_guide_file(tmp_path, monkeypatch):
    monkeypatch.setattr(titles_module, "GUIDE_FILE", tmp_path / "missing.txt")
    assert guide_titles() == {}
    assert title("1.7") == TITLES["1.7"]
    assert title("1.7").startswith("1.7 ") and "张量并行" in title("1.7")
    with pytest.raises(ValueError, match="9.9"):
        title("9.9")


def test_every_explanation_cites_its_section_and_chapter():
    chapter_titles = {s: [c.title for c in CHAPTERS if s in c.sections] for s in SECTIONS}
    for q in BANK:
        card = q.pose(0)
        assert card.title_zh == TITLES[q.section]
        assert f"guide {q.section} " in card.explanation, q.key
        assert any(t in card.explanation for t in chapter_titles[q.section]), q.key
        assert card.text().startswith(f"[guide {q.section} | {q.topic}]")


def test_card_and_feedback_text_stay_narrow():
    for q in BANK:
        card = q.pose(1)
        for text in (card.text(), card.check(wrong_answer(card)).text(), card.check("??").text()):
            assert max(map(len, text.splitlines())) <= 110, (q.key, text)


# -- every answer checks -------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [q.key for q in BANK])
def test_the_right_answer_is_correct_and_a_wrong_one_is_not(key):
    q = get(key)
    for seed in SEEDS if q.generated else (0,):
        card = q.pose(seed)
        right, wrong = card.check(right_answer(card)), card.check(wrong_answer(card))
        assert right.readable and right.correct, (key, seed, right)
        assert wrong.readable and not wrong.correct, (key, seed, wrong)
        assert right.expected == wrong.expected == card.expected
        assert card.expected in wrong.message


def test_choices_accept_letters_numbers_and_the_option_text():
    card = get("dp-collective").pose(0)
    assert card.check("ALL_REDUCE").correct and card.check(" All Reduce ").correct
    card = get("pp-what").pose(3)
    letter = LETTERS[card.answer]
    for typed in (letter.lower(), f" {letter}) ", f"({letter})", str(card.answer + 1),
                  card.options[card.answer].upper()):
        assert card.check(typed).correct, typed
    assert not card.check(wrong_answer(card)).correct


def test_names_ignore_case_spacing_and_suffixes():
    card = get("one-node-no-nvlink").pose(0)
    for typed in ("pipeline parallel", "Pipeline Parallelism", "PP", "pipeline", "3"):
        assert card.check(typed).correct, typed
    assert not card.check("tensor parallelism").correct
    bound = next(c for c in (get("gen-bound").pose(s) for s in range(40)) if c.answer == "latency")
    assert bound.check("Latency-bound").correct and not bound.check("bandwidth bound").correct


def test_choice_order_is_seeded_and_varies():
    q = get("pp-what")
    assert q.pose(5).options == q.pose(5).options
    assert len({q.pose(s).options for s in range(20)}) > 1


def test_generated_questions_vary_with_the_seed():
    for q in BANK:
        if q.generated:
            assert len({q.pose(s).prompt for s in range(15)}) > 1, q.key


# -- generated answers are parlab's numbers ------------------------------------------------------------
def _tp_facts(p, recompute="none"):
    est = cm.estimate(p["model"], cm.make_cluster("dgx-a100", p["tp"]),
                      cm.Plan(tp=p["tp"], micro_batch=p["micro_batch"], dtype="bf16", recompute=recompute))
    return est.time.facts


LIBRARY = {
    "gen-states": lambda p: cm.model_state_memory(p["n_params"], "mixed", "adam").total,
    "gen-6nd": lambda p: cm.train_flops_6nd(p["n_params"], p["tokens"]),
    "gen-bytes-per-param": lambda p: cm.bytes_per_param(p["dtype"], p["optimizer"]),
    "gen-days": lambda p: compute_wall(p["model"], p["tokens"], p["gpu"], p["n_gpus"], p["utilisation"]).seconds,
    "gen-ring-time": lambda p: cm.alphabeta.time("all_reduce", "ring", p["ranks"], p["nbytes"], p["alpha"],
                                                 p["bandwidth"]).seconds,
    "gen-busbw": lambda p: cm.alphabeta.bus_bandwidth("all_reduce", p["ranks"], p["nbytes"], p["seconds"]),
    "gen-bound": lambda p: cm.alphabeta.time("all_reduce", "ring", p["ranks"], p["nbytes"], p["alpha"],
                                             p["bandwidth"]).bound,
    "gen-bubble": lambda p: schedules.simulate(schedules.make_schedule(p["schedule"], p["p"], p["m"])).bubble_fraction,
    "gen-in-flight": lambda p: schedules.peak_activations(schedules.one_f_one_b(p["p"], p["m"]))[p["stage"]],
    "gen-tp-message": lambda p: _tp_facts(p)["msg"],
    "gen-tp-layer": lambda p: (_tp_facts(p, p["recompute"])["n_tp"] / _tp_facts(p, p["recompute"])["L"]
                               * cm.alphabeta.shape("all_reduce", "ring", p["tp"], _tp_facts(p)["msg"])[1]),
    "gen-rank": lambda p: cm.rank_of(p["tp_rank"], p["dp_rank"], p["pp_rank"], p["tp"], p["dp"]),
    "gen-naive-bubble": lambda p: schedules.simulate(schedules.naive(p["p"])).bubble_fraction,
    "gen-gpus-to-hold": lambda p: memory_wall(p["model"], "mixed", "adam", 1, "full").fit(p["gpu"]).min_gpus,
    "gen-largest": lambda p: cm.largest_model(cm.get_gpu(p["gpu"]).memory_bytes, p["dtype"], p["optimizer"]),
    "gen-zero-stage": lambda p: cm.zero_model_states(p["n_params"], p["dp"], p["stage"]).total,
    "gen-zero3-traffic": lambda p: cm.zero3_traffic_per_step(p["n_params"], p["dp"], "bf16", 1, p["recompute"]),
    "gen-zero3-seconds": lambda p: (cm.zero3_traffic_per_step(p["n_params"], p["dp"])
                                    / cm.get_link(p["link"]).bandwidth),
    "gen-gbit": lambda p: cm.gbit_per_s(p["gbit"]),
    "gen-interleaved": lambda p: schedules.simulate(
        schedules.interleaved_1f1b(p["p"], p["m"], p["v"])).bubble_fraction,
    "gen-activations": lambda p: cm.activation_bytes_per_layer(cm.get_model(p["model"]), p["micro_batch"], p["tp"],
                                                               p["sequence_parallel"], p["recompute"]),
    "gen-mtnlg-nodes": lambda p: cm.Plan(dp=p["dp"], tp=8, pp=35).n_gpus // 8,
    "gen-multinode": lambda p: cm.comm_time_vs_bandwidth(cm.model_state_memory(p["n_params"]).grads, p["nodes"],
                                                         [p["gbit"]], latency_us=p["latency_us"],
                                                         efficiency=p["efficiency"])[0],
    "stage3-saving": lambda p: (cm.zero_model_states(p["n_params"], p["dp"], 2).total
                                - cm.zero_model_states(p["n_params"], p["dp"], 3).total),
    "gen-gqa-kv-cache": lambda p: (2 * cm.get_model(p["model"]).layers * cm.get_model(p["model"]).kv_heads
                                   * cm.get_model(p["model"]).head_dim * 2 * p["tokens"]),
    "gen-fp8-weights": lambda p: (
        cm.estimate(p["model"], cm.make_cluster("dgx-h100", p["tp"]),
                    cm.Plan(tp=p["tp"], recompute="full", dtype="fp8")).memory_terms()["parameters"]
        - cm.estimate(p["model"], cm.make_cluster("dgx-h100", p["tp"]),
                      cm.Plan(tp=p["tp"], recompute="full")).memory_terms()["parameters"]),
    "gen-uneven-stages": lambda p: (cm.get_model(p["model"]).layers + 2) // p["pp"] - 1,
    "fits-one-gpu": lambda p: "yes" if one_gpu_walk(p["model"], 1, p["recompute"], p["gpu"], dtype=p["dtype"])[-1].total
    <= cm.get_gpu(p["gpu"]).memory_bytes else "no",
}


def test_every_generated_question_has_a_library_reference_here():
    assert {q.key for q in BANK if q.generated} == set(LIBRARY)


@pytest.mark.parametrize("key", sorted(LIBRARY))
def test_generated_answers_equal_the_library_value(key):
    q = get(key)
    for seed in range(25):
        card = q.pose(seed)
        expected = LIBRARY[key](card.params)
        if isinstance(expected, str):
            assert card.answer == expected
        else:
            assert card.answer == pytest.approx(expected, rel=1e-12), (key, seed, card.params)


def test_fixed_numeric_answers_come_from_parlab():
    assert get("gpt3-fp32-states").pose().answer == cm.model_state_memory(
        cm.get_model("gpt3-175b").num_params(), "fp32", "adam").total
    assert get("80gb-train").pose().answer == cm.largest_model(80e9)
    assert get("zero3-paper").pose().answer == pytest.approx(cm.zero_paper_example()[3] * 1e9)
    assert get("guide-1-19-bytes").pose().answer == cm.guide_1_19().bytes_fp16
    assert get("mtnlg-replica").pose().answer == cm.Plan(tp=8, pp=35).n_gpus
    assert get("bubble-what").pose().check("A").readable


# -- reading learner input --------------------------------------------------------------------------------
@pytest.mark.parametrize("typed, dimension, unit, value", [
    ("12.5 GB", "bytes", "GB", 12.5e9), ("12.5", "bytes", "GB", 12.5e9), ("  12.5gb ", "bytes", "GB", 12.5e9),
    ("80 GiB", "bytes", "GB", 80 * 2**30), ("1,234.5 MB", "bytes", "GB", 1234.5e6), ("2.8 TB", "bytes", "GB", 2.8e12),
    ("3e9 bytes", "bytes", "GB", 3e9), ("10 Gb/s", "rate", "GB/s", 1.25e9), ("10 Gbps", "rate", "GB/s", 1.25e9),
    ("1.25 GB/s", "rate", "GB/s", 1.25e9), ("1.25", "rate", "GB/s", 1.25e9), ("70 ms", "seconds", "ms", 0.07),
    ("70", "seconds", "ms", 0.07), ("0.07 s", "seconds", "ms", 0.07), ("150 µs", "seconds", "ms", 150e-6),
    ("2 days", "seconds", "days", 172800.0), ("3/11", "fraction", "", 3 / 11), ("25%", "fraction", "", 0.25),
    ("7B", "count", "", 7e9), ("6.7 billion", "count", "", 6.7e9), ("1.2e23 FLOPs", "count", "", 1.2e23),
    ("2240 GPUs", "count", "", 2240.0), ("2.3x", "ratio", "", 2.3), ("16 bytes/param", "bytes/param", "bytes/param", 16),
])
def test_read_number(typed, dimension, unit, value):
    assert read_number(typed, dimension, unit) == pytest.approx(value)


@pytest.mark.parametrize("typed", [None, "", "   ", "abc", "12 parsecs", "1.2.3", "nan", [], "GB", True, "5 ms"])
def test_unreadable_numbers_give_a_message_not_an_exception(typed):
    card = get("gen-states").pose(0)  # a GB question
    result = card.check(typed)
    assert not result.readable and not result.correct
    assert result.message.startswith("Could not read your answer")
    assert "GB" in result.message  # says what to type
    with pytest.raises(Unreadable):
        read_number(typed, "bytes", "GB")


@pytest.mark.parametrize("typed", [None, "", "Z", "9", "all-reduce please", 3.5])
def test_unreadable_choices_and_names_give_a_message(typed):
    for key in ("pp-what", "dp-collective"):
        result = get(key).pose(0).check(typed)
        assert not result.readable and not result.correct and "Could not read" in result.message


def test_units_carry_their_meaning():
    card = get("gen-states").pose(0)
    gb = float(card.answer) / 1e9
    assert card.check(f"{gb} GB").correct and card.check(f"{float(card.answer)} B").correct
    assert card.check(f"{float(card.answer) / 2**30} GiB").correct
    assert not card.check(f"{gb} GiB").correct  # GiB is 7% more than GB
    link = get("10gbe-bytes").pose()
    assert link.check("10 Gb/s").correct and link.check("1.25 GB/s").correct
    assert not link.check("10 GB/s").correct  # bits are not bytes


def test_fractions_accept_fraction_decimal_and_percent():
    card = next(c for c in (get("gen-bubble").pose(s) for s in range(50))
                if isinstance(c.answer, Fraction) and c.answer.denominator > 1)
    f = card.answer
    for typed in (f"{f.numerator}/{f.denominator}", f"{float(f):.4f}", f"{float(f) * 100:.2f}%"):
        assert card.check(typed).correct, typed
    assert card.expected.startswith(f"{f.numerator}/{f.denominator}")


def test_a_tolerance_is_a_tolerance():
    card = get("gen-ring-time").pose(2)
    ms = float(card.answer) * 1e3
    assert card.check(f"{ms * 1.019} ms").correct and not card.check(f"{ms * 1.03} ms").correct
    assert math.isclose(card.rtol, 0.02)


# -- the quiz -----------------------------------------------------------------------------------------------
def test_quiz_filters_by_section_part_topic_and_kind():
    assert {q.section for q in Quiz(sections=["1.6", "1.7"]).questions} == {"1.6", "1.7"}
    assert {q.section for q in Quiz(sections="4").questions} == {"4.1", "4.2", "4.3", "4.4", "4.5"}
    assert {q.topic for q in Quiz(topics="zero").questions} == {"zero"}
    assert {q.kind for q in Quiz(kinds=["number"], sections="1").questions} == {"number"}
    assert len(Quiz()) == len(BANK)
    both = select(sections="1.16", topics="zero")
    assert both and all(q.section == "1.16" and q.topic == "zero" for q in both)


@pytest.mark.parametrize("kwargs, named", [({"sections": "9.9"}, "sections"), ({"topics": "cooking"}, "topics"),
                                           ({"kinds": "essay"}, "kinds")])
def test_quiz_rejects_unknown_filters_by_name(kwargs, named):
    with pytest.raises(ValueError, match=named):
        Quiz(**kwargs)


def test_quiz_rejects_an_empty_selection():
    with pytest.raises(ValueError, match="no drill question"):
        Quiz(sections="4.3", topics="pipeline")


def test_quiz_draws_every_question_once_before_repeating_and_is_seeded():
    quiz = Quiz(sections="1.7", seed=4)
    keys = [quiz.next().key for _ in range(len(quiz))]
    assert sorted(keys) == sorted(q.key for q in quiz.questions)
    again = Quiz(sections="1.7", seed=4)
    assert [again.next().key for _ in range(len(again))] == keys
    other = [Quiz(sections="1", seed=s).next().key for s in range(10)]
    assert len(set(other)) > 1


def test_quiz_keeps_score_once_per_card_and_ignores_unreadable_answers():
    quiz = Quiz(sections="1.3", seed=0)
    assert not quiz.answer("A").readable and quiz.score.answered == 0  # no card yet
    card = quiz.next()
    assert not quiz.answer("???").readable and quiz.score.answered == 0 and not quiz.answered
    assert quiz.answer(right_answer(card)).correct
    assert quiz.answered and (quiz.score.answered, quiz.score.correct) == (1, 1)
    quiz.answer(wrong_answer(card))  # a second try on the same card is feedback only
    assert (quiz.score.answered, quiz.score.correct) == (1, 1)
    card = quiz.next()
    assert not quiz.answer(wrong_answer(card)).correct
    assert (quiz.score.answered, quiz.score.correct) == (2, 1)
    assert quiz.score.by_section == {"1.3": [1, 2]}
    assert quiz.score.text() == "1 / 2 correct (50%)"
    assert [r.correct for _, r in quiz.history] == [True, False]
