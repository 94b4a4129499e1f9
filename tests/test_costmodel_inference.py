"""The decode-latency model (parlab.costmodel.pricing.inference) and guide 4.1's tables (parlab.course.guide_tables)."""

import math

import pytest

from parlab.costmodel import get_gpu, get_model
from parlab.costmodel.pricing.inference import (
    fit_decode,
    forward_flops_per_token,
    generation_time,
    gpu_gap,
    kv_cache_bytes_per_token,
    prefill_flops,
    tokens_from_chars,
    weight_bytes,
)
from parlab.course.guide_tables import (
    GUIDE_4_1,
    chatglm_inference,
    chatglm_source,
    line_fit,
    measured_pairs,
)

GLM = get_model("chatglm-6b")


def test_kv_cache_per_token_is_2_layers_kv_heads_head_dim_bytes():
    assert kv_cache_bytes_per_token(GLM) == 2 * 28 * 32 * 128 * 2 == 458_752
    assert kv_cache_bytes_per_token(GLM, kv_heads=1) == 458_752 / 32  # multi-query attention
    assert kv_cache_bytes_per_token(GLM, kv_heads=8, bytes_per_value=1) == 2 * 28 * 8 * 128
    with pytest.raises(ValueError, match="kv_heads must divide"):
        kv_cache_bytes_per_token(GLM, kv_heads=5)


def test_weights_read_per_token_are_every_parameter_in_fp16():
    assert weight_bytes(GLM) == 2 * GLM.num_params()


def test_decode_sum_equals_token_by_token_loop():
    """The closed form of generation_time against a serial loop over decode steps."""
    n, p, eff, c = 300, 20, 0.7, 0.004
    g = get_gpu("a800")
    gen = generation_time(GLM, g, n, p, bandwidth_efficiency=eff, overhead_s=c)
    bw = g.hbm_bytes_per_s * eff
    loop = sum((weight_bytes(GLM) + kv_cache_bytes_per_token(GLM) * (p + t)) / bw for t in range(n))
    assert gen.memory_bound
    assert gen.decode_s == pytest.approx(loop, rel=1e-12)
    assert gen.overhead_s == pytest.approx(n * c)
    assert gen.total_s == pytest.approx(gen.prefill_s + loop + n * c)
    assert sum(gen.terms().values()) == pytest.approx(gen.total_s)


def test_time_grows_linearly_in_tokens_plus_a_quadratic_kv_term():
    one, two = (generation_time(GLM, "v100", n, 0) for n in (200, 400))
    assert two.weights_s == pytest.approx(2 * one.weights_s)
    assert two.kv_s > 4 * one.kv_s * 0.99  # sum of a growing context: ~n^2 / 2
    assert two.kv_s < 0.05 * two.weights_s  # at batch 1 the weights dominate


def test_prefill_flops_is_the_sum_of_per_token_forwards():
    s = 37
    assert prefill_flops(GLM, s) == pytest.approx(sum(forward_flops_per_token(GLM, i) for i in range(s)))


def test_large_batch_decode_turns_compute_bound():
    assert generation_time(GLM, "a800", 10, batch=1).memory_bound
    assert not generation_time(GLM, "a800", 10, batch=4096).memory_bound


def test_fit_recovers_a_known_efficiency_and_overhead():
    eff, c = 0.62, 0.0075
    rows = []
    for gpu in ("a800", "v100"):
        for chars in (90, 240, 600):
            n = tokens_from_chars(chars)
            rows.append((gpu, chars, generation_time(GLM, gpu, n, bandwidth_efficiency=eff, overhead_s=c).total_s))
    fit = fit_decode(rows)
    assert fit.bandwidth_efficiency == pytest.approx(eff, rel=1e-9)
    assert fit.overhead_s == pytest.approx(c, rel=1e-9)
    assert fit.rms_residual < 1e-9


def test_guide_tables_are_fitted_with_a_physical_efficiency_and_overhead():
    fit = fit_decode(measured_pairs())
    assert fit.physical and 0.3 < fit.bandwidth_efficiency < 1 and 0 < fit.overhead_s < 0.05
    assert fit.rms_residual < 0.3  # seconds, on answers of 1.3-11.4 s
    gap = gpu_gap(fit, 500)
    assert 1 < gap.time_ratio < gap.bandwidth_ratio  # the overhead pulls the gap towards 1
    assert gap.bandwidth_ratio == pytest.approx(2039 / 900)
    # the fitted gap does not depend on the assumed characters per token, only the split does
    other = fit_decode(measured_pairs(), chars_per_token=2.0)
    assert gpu_gap(other, 500).time_ratio == pytest.approx(gap.time_ratio, rel=0.01)
    assert other.overhead_s > fit.overhead_s


def test_an_unphysical_fit_is_refused_when_used():
    fit = fit_decode(measured_pairs(), chars_per_token=0.5)
    assert not fit.physical
    with pytest.raises(ValueError, match="unphysical"):
        fit.predict("a800", 100)


@pytest.mark.parametrize("call, match", [
    (lambda: generation_time(GLM, "a800", 0), "new_tokens"),
    (lambda: generation_time(GLM, "a800", 10, bandwidth_efficiency=0), "bandwidth_efficiency"),
    (lambda: generation_time(GLM, "a800", 10, overhead_s=-1), "overhead_s"),
    (lambda: generation_time(GLM, "no-such-gpu", 10), "unknown GPU"),
    (lambda: fit_decode([("a800", 100, 1.0)]), "at least 2"),
    (lambda: fit_decode([("a800", 100, 1.0), ("a800", 100, 1.1)]), "different bandwidths"),
    (lambda: tokens_from_chars(10, 0), "chars_per_token"),
])
def test_bad_inputs_name_the_rule(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_guide_4_1_tables_as_data():
    rows = chatglm_inference()
    assert len(rows) == 20 and len(chatglm_inference("a800")) == len(chatglm_inference("v100")) == 10
    assert {r.requested_chars for r in rows} == {50, 100, 200, 300, 500} and all(r.runs == 5 for r in rows)
    assert "4.1" in chatglm_source()
    with pytest.raises(ValueError, match="no table"):
        chatglm_inference("h100")
    a800, v100 = line_fit("a800"), line_fit("v100")
    assert 0.9 < a800.per_100_chars < 1.4 and 1.6 < v100.per_100_chars < 2.2
    # the guide's rule of thumb is looser than its own tables
    assert v100.slope / a800.slope - 1 > GUIDE_4_1["v100_slower_by"] + 0.2
    assert math.isclose(sum(r.seconds for r in chatglm_inference("a800")), 36.59, rel_tol=1e-9)
