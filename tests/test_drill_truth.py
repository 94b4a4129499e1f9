"""The drill's cards of issue 19 agree with the chapters and with the measurements (items 1, 3, 10):
each answer computed again here, the same question asked in two places giving the same number."""

import pytest

from parlab.costmodel import bloom_table, zero3_traffic_per_step
from parlab.course.guide import check
from parlab.course.guide_tables import line_fit
from parlab.data import read_csv
from parlab.drill import get


def test_bloom_160_memory_accepts_the_measurement_and_shows_the_model_beside_it():
    row = next(r for r in bloom_table() if r.dp == 2)
    card = get("bloom-160-memory").pose(0)
    assert card.answer == pytest.approx(row.measured_gb * 1e9)  # 53 GB, what BLOOM measured
    assert f"{row.predicted_gb:.3g} GB" in card.explanation and f"{row.memory_error:+.0%}" in card.explanation


@pytest.mark.parametrize("key", ["gen-largest", "gen-bytes-per-param"])
def test_sgd_says_it_keeps_no_momentum(key):
    for seed in range(40):
        card = get(key).pose(seed)
        if card.params.get("optimizer") == "sgd":
            assert "no momentum" in card.prompt
        if card.params.get("optimizer") == "momentum":
            assert "with momentum" in card.prompt


def test_hbm_card_uses_chapter_11s_slope_ratio_not_the_guides_40_percent():
    slower = line_fit("v100").slope / line_fit("a800").slope - 1
    card = get("hbm-a800-v100").pose(0)
    assert f"only {slower:.0%} slower" in card.explanation and slower > 0.6


def test_zero3_traffic_card_counts_two_gathers_with_full_recompute():
    for seed in range(20):
        card = get("gen-zero3-traffic").pose(seed)
        p = card.params
        assert card.answer == pytest.approx(3 * 2 * p["n_params"] * (p["dp"] - 1) / p["dp"])
        assert card.answer == pytest.approx(zero3_traffic_per_step(p["n_params"], p["dp"], "bf16", 1, "none"))
        assert "2 weight gathers" in card.explanation


def test_combine_card_takes_the_courses_one_position_with_the_published_numbers():
    card = get("combine").pose(0)
    rows = read_csv("megatron2021_zero3")
    z3 = next(float(r["tflops_per_gpu"]) for r in rows if r["scheme"] == "zero3" and r["gpus"] == "1536")
    ptdp = next(float(r["tflops_per_gpu"]) for r in rows if r["scheme"] == "ptd-p" and r["gpus"] == "1536")
    assert "ZeRO-3/FSDP alone does not train 100B+-class models efficiently" in card.explanation
    assert "OPT-175B used FSDP together with Megatron-LM TP = 8" in card.explanation
    assert f"{z3:g} TFLOP/s per GPU" in card.explanation and f"PTD-P's {ptdp:g}" in card.explanation
    assert "sharding alone is not enough" in card.options[card.answer]


def test_a_model_prediction_beside_a_guide_claim_shows_the_band():
    assert check("65b-zero3-seconds", 156 * 1.08, model=True).verdict() == "tie: x1.08, in model's ±25%"
    far = check("65b-zero3-seconds", 330, model=True)
    assert not far.agrees and far.verdict() == "x2.12, beyond model's ±25%"
    assert check("65b-zero3-seconds", 330).verdict() == "off by x2.12"  # arithmetic, no band


def test_no_card_adds_a_gather_for_recompute():
    """Item 1 everywhere in the drill: no card's text says recompute adds ZeRO-3 traffic."""
    from parlab.drill import BANK

    for q in BANK:
        card = q.pose(0)
        text = (card.prompt + " " + card.explanation).lower()
        assert "third time" not in text and "more with recompute" not in text, q.key
        assert "3 weight gathers" not in text, q.key


def test_the_same_question_in_the_drill_and_chapter_07_gets_the_same_number():
    """guide 1.19's bytes: the drill's card and chapter 07's guide_1_19 (2 gathers + 1 reduce-scatter)."""
    from parlab.costmodel import guide_1_19

    g = guide_1_19()
    assert get("guide-1-19-bytes").pose(0).answer == pytest.approx(g.bytes_fp16)
    assert g.bytes_fp16 == pytest.approx(zero3_traffic_per_step(g.n_params, g.dp, recompute="full"))
