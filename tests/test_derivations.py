"""Chapter 14's derivations, each checked against the cost model's own number (issue 19 item 15)."""

import math

import pytest

from parlab.costmodel import (
    Plan,
    activation_bytes_per_layer,
    alphabeta,
    estimate,
    get_model,
    make_cluster,
    step_flops,
    zero_model_states,
)
from parlab.costmodel.pricing.tensor_parallel import tp_layer_collectives
from parlab.course import derivations as d

GPT3 = get_model("gpt3-175b")


@pytest.mark.parametrize("b", [1, 4])
def test_34sbh_plus_5as2b_term_by_term_is_the_cost_model_s_count(b):
    der = d.activation_terms(GPT3, b)
    s, h, a = GPT3.seq_len, GPT3.hidden, GPT3.heads
    assert der.total == pytest.approx(s * b * h * (34 + 5 * a * s / h))
    assert der.total == pytest.approx(activation_bytes_per_layer(GPT3, b))


def test_training_flops_are_6nd_plus_attention_and_logits():
    der = d.training_flops(GPT3, 8)
    assert der.total == pytest.approx(step_flops(GPT3, 8)[0])
    s, h, n_layers, V = GPT3.seq_len, GPT3.hidden, GPT3.layers, GPT3.vocab
    assert der.total / d.six_nd(GPT3, 8) == pytest.approx(1 + s / (6 * h) + V / (12 * n_layers * h))


def test_mfu_and_hfu_are_the_estimate_s_and_recompute_adds_a_third():
    est = estimate(GPT3, make_cluster("dgx-a100", 1024), Plan(dp=16, tp=8, pp=8, global_batch=1536,
                                                              recompute="full"))
    u = d.utilisation(est)
    assert u.mfu == pytest.approx(est.mfu)
    assert u.hfu * u.peak == pytest.approx(est.hardware_tflops_per_gpu * 1e12)
    assert 1.3 < u.hfu / u.mfu < 4 / 3


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_formulas_are_the_cost_model_s_and_the_paper_s_example(stage):
    assert d.zero_states(7.5e9, 64, stage).total == pytest.approx(zero_model_states(7.5e9, 64, stage).total)
    assert round(d.zero_states(7.5e9, 64, stage).total / 1e9, 1) == {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}[stage]


def test_tp_bytes_per_layer_are_four_ring_all_reduces():
    der = d.tp_bytes_per_layer(1, 2048, 12288, 8)
    cs = tp_layer_collectives(1, 2048, 12288, 8)
    assert der.total == pytest.approx(sum(c.count * alphabeta.traffic(c.op, "ring", 8, c.elements * 2)[0] for c in cs))
    assert der.total == pytest.approx(16 * 2048 * 12288 * 7 / 8)


def test_dp_all_reduce_hides_above_the_derived_tokens_per_gpu():
    model, cluster = get_model("gpt3-6.7b"), make_cluster("pcie-10gbe", 8)
    est = estimate(model, cluster, Plan(dp=8))
    f = est.time.facts
    tokens = d.dp_hiding_tokens(f["peak"] * est.assumptions.matmul_efficiency, f["bw"]["dp"], 8)
    below = max(1, math.floor(tokens / 2 / model.seq_len))
    above = math.ceil(2 * tokens / model.seq_len)
    assert estimate(model, cluster, Plan(dp=8, micro_batch=below)).time.dp_comm > 0
    assert estimate(model, cluster, Plan(dp=8, micro_batch=above)).time.dp_comm == 0


def test_tp_comm_to_compute_falls_as_one_over_h_as_in_the_cost_model():
    ratios = {}
    for name in ("gpt3-6.7b", "gpt3-175b"):
        m = get_model(name)
        e = estimate(m, make_cluster("dgx-a100", 8), Plan(tp=8))
        f, a = e.time.facts, e.assumptions
        model_ratio = f["t_tp_mb"] / (1 - a.tp_overlap) / f["t_mm_mb"]
        derived = d.tp_comm_to_compute(m.hidden, 8, f["peak"] * a.matmul_efficiency, f["bw"]["tp"], m.seq_len)
        assert derived == pytest.approx(model_ratio, rel=0.25)
        ratios[name] = (model_ratio, m.hidden)
    (r1, h1), (r2, h2) = ratios["gpt3-6.7b"], ratios["gpt3-175b"]
    assert r2 / r1 == pytest.approx(h1 / h2, rel=0.1)


def test_the_bubble_is_the_cost_model_s_and_small_when_m_is_large():
    est = estimate(GPT3, make_cluster("dgx-a100", 512), Plan(dp=8, tp=8, pp=8, global_batch=512, recompute="full",
                                                             schedule="interleaved", chunks=2))
    p = est.plan
    assert d.bubble_fraction(p.pp, p.m, p.chunks) == pytest.approx(est.time.facts["bubble_frac"])
    assert est.time.bubble == pytest.approx(d.bubble_fraction(p.pp, p.m, p.chunks) * p.m * est.time.facts["per_mb"])
    m = d.micro_batches_for_bubble(8, 0.05)
    assert d.bubble_fraction(8, m) <= 0.05 < d.bubble_fraction(8, m - 1)
