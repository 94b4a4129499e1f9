"""Today's attention priced: grouped-query attention, a head dimension other than h / a, sliding
windows and the small fields (``pricing/attention_terms.py``) in FLOPs, activation memory,
parameters under TP, context-parallel bytes, the KV cache and ``explain``; multi-head attention
prices exactly as before."""

from __future__ import annotations

import pytest

from parlab.costmodel import Plan, estimate, get_model, make_cluster
from parlab.costmodel.plan.comm_5d import cp_layer_bytes
from parlab.costmodel.plan.spec import check_plan
from parlab.costmodel.pricing.attention_terms import describe, score_flops
from parlab.costmodel.pricing.inference import kv_cache_bytes, kv_cache_bytes_per_token
from parlab.costmodel.pricing.layer_flops import layer_forward_flops, step_flops
from parlab.costmodel.pricing.memory import activation_bytes_per_layer, attention_score_bytes
from parlab.costmodel.pricing.params import layer_params_per_gpu
from parlab.costmodel.specs.models import ModelSpec
from parlab.costmodel.specs.modern_presets import MODERN_MODELS

LLAMA3_8B = get_model("llama-3.1-8b")
MHA = LLAMA3_8B.with_(kv_heads=0)  # the same shape with 32 K/V heads


# -- multi-head attention: unchanged ----------------------------------------------------------
@pytest.mark.parametrize("name", ["gpt3-175b", "llama-7b", "bloom-176b", "chatglm-6b"])
def test_multi_head_attention_prices_as_the_closed_forms(name):
    """The 3D formulas as they were: 2bs(4h^2 + n h f) + 4bs^2h FLOPs, Korthikanti Table 2 bytes,
    Megatron's split of 4h^2 + 2 or 3 hf (+ biases) weights."""
    m = get_model(name)
    s, h, f, a, b, t = m.seq_len, m.hidden, m.ffn, m.heads, 2, 4
    n = 3 if m.gated_mlp else 2
    assert layer_forward_flops(m, b, t) == (2 * b * s * (4 * h * h + n * h * f) + 4 * b * s * s * h) / t
    mlp = s * b * f * (6 if m.gated_mlp else 4)
    scores = 4 * a * s * b / t if m.flash_attention else (5 if m.dropout else 2) * a * s * s * b / t
    whole = s * b * h * (8 + (2 if m.dropout else 0))
    assert activation_bytes_per_layer(m, b, t) == whole + (8 * s * b * h + mlp) / t + scores
    split = 4 * h * h + (n - 1 + 1) * h * f + (3 * h + (n - 1) * f if m.bias else 0)
    replicated = 2 * (2 * h if m.bias else h) + (2 * h if m.bias else 0)
    assert layer_params_per_gpu(m, t) == split / t + replicated


def test_kv_heads_equal_to_heads_is_multi_head_attention():
    """kv_heads = heads spelled out prices exactly as kv_heads = 0 (all heads)."""
    spelled = ModelSpec("mha", 32, 4096, 32, 4096, 32000, 11008, gated_mlp=True, bias=False, kv_heads=32)
    implicit = spelled.with_(kv_heads=0)
    cluster, plan = make_cluster("dgx-a100", 16), Plan(dp=2, tp=4, pp=2, global_batch=16)
    one, two = estimate(spelled, cluster, plan), estimate(implicit, cluster, plan)
    assert (one.memory_total, one.step_time, one.mfu) == (two.memory_total, two.step_time, two.mfu)
    assert describe(spelled) == ""


# -- FLOPs -----------------------------------------------------------------------------------
def test_llama3_8b_flops_per_token_are_6n_plus_attention():
    """Chowdhery et al. 2022, App. B: 6N + 12 l s (a d) per token, N the weights a token multiplies
    (the input embedding is a lookup, the norms elementwise: left out of N)."""
    m = LLAMA3_8B
    model_flops, _ = step_flops(m, 1)
    n_matmul = m.num_params() - m.vocab * m.hidden - (2 * m.layers + 1) * m.hidden
    expected = 6 * n_matmul + 12 * m.layers * m.seq_len * m.q_width
    assert model_flops / m.seq_len == pytest.approx(expected, rel=1e-12)
    assert model_flops / m.seq_len == pytest.approx(6 * m.num_params() + 12 * m.layers * m.seq_len * m.q_width,
                                                    rel=0.07)  # 6N with the 0.5B input embedding


def test_gqa_projection_flops_come_from_the_matrices():
    """K, V projections of g d: 2bs(h a d + 2 h g d + a d h) in place of 8bsh^2."""
    m, h, s = LLAMA3_8B, LLAMA3_8B.hidden, LLAMA3_8B.seq_len
    saved = layer_forward_flops(MHA) - layer_forward_flops(m)
    assert saved == 2 * s * 2 * h * (MHA.kv_width - m.kv_width)


def test_head_dim_sets_the_attention_width():
    """Qwen3-32B: 64 heads x 128 = 8192 != hidden 5120; scores 4 b s^2 (a d)."""
    m = get_model("qwen3-32b")
    assert m.q_width == 8192 != m.hidden
    assert score_flops(m, 1) == 4 * m.seq_len**2 * 8192


def test_window_bounds_score_flops_and_memory():
    """Mistral-style windows: each query against min(w, s) keys (same causal convention)."""
    base = ModelSpec("w", 4, 1024, 8, 8192, 1000, gated_mlp=True, bias=False, flash_attention=False,
                     dropout=False, kv_heads=2)
    windowed = base.with_(window=2048)
    assert score_flops(windowed) == score_flops(base) / 4
    assert attention_score_bytes(windowed) == attention_score_bytes(base) / 4
    assert base.with_(window=8192).window_layers == 0  # a window >= s bounds nothing
    half = base.with_(window=2048, window_pattern=2)  # every other layer full (GPT-OSS)
    assert score_flops(half) == (score_flops(base) + score_flops(windowed)) / 2
    assert layer_forward_flops(windowed) < layer_forward_flops(half) < layer_forward_flops(base)


# -- memory ----------------------------------------------------------------------------------
@pytest.mark.parametrize("tp", [1, 2, 8])
def test_gqa_lowers_stored_qkv_in_proportion_to_kv_width(tp):
    s, b = LLAMA3_8B.seq_len, 1
    saved = activation_bytes_per_layer(MHA, b, tp) - activation_bytes_per_layer(LLAMA3_8B, b, tp)
    assert saved == 2 * s * b * 2 * (MHA.kv_width - LLAMA3_8B.kv_width) / tp


def test_kv_heads_below_tp_replicate_kv_activations_not_weights():
    """Megatron-Core (attention.py, num_query_groups < world_size): the fused QKV weights are split
    evenly over tp, each rank keeps one K/V head of activations."""
    g2 = ModelSpec("g2", 4, 4096, 32, 4096, 1000, gated_mlp=True, bias=False, kv_heads=2)
    g8 = g2.with_(kv_heads=8)
    assert activation_bytes_per_layer(g2, 1, 8) == activation_bytes_per_layer(g8, 1, 8)  # one head per rank
    assert activation_bytes_per_layer(g2, 1, 2) < activation_bytes_per_layer(g8, 1, 2)
    d, h = g2.head_dim, g2.hidden
    assert layer_params_per_gpu(g8, 8) - layer_params_per_gpu(g2, 8) == 2 * h * (8 - 2) * d / 8
    assert layer_params_per_gpu(g2, 8) * 8 == g2.params_per_layer() + 7 * 2 * h  # only the norms replicated
    check_plan(g2, make_cluster("dgx-h100", 8), Plan(tp=8))


def test_qk_norm_and_sandwich_norms_keep_their_inputs():
    base = ModelSpec("n", 4, 2048, 16, 2048, 1000, gated_mlp=True, bias=False, kv_heads=4, head_dim=128)
    s = base.seq_len
    assert (activation_bytes_per_layer(base.with_(qk_norm=True)) - activation_bytes_per_layer(base)
            == 2 * s * (base.q_width + base.kv_width))
    assert activation_bytes_per_layer(base.with_(sandwich_norm=True)) - activation_bytes_per_layer(base) == 4 * s * 2048


@pytest.mark.parametrize("name", ["qwen3-8b", "qwen2.5-7b", "gpt-oss-20b", "mixtral-8x22b"])
def test_params_per_gpu_add_up_to_the_exact_count(name):
    """tp = 1: one layer's share is the exact per-layer count (QK-norm, biases, sinks included)."""
    m = get_model(name)
    if m.moe is None:
        assert layer_params_per_gpu(m, 1) == m.params_per_layer()
    else:
        from parlab.costmodel.pricing.moe_layer import layer_param_split

        dense, experts = layer_param_split(m, 1, 1)
        moe = m.moe
        assert dense + experts == m.attention_layer_params() + m.norm_params_per_layer() + moe.layer_params(m.hidden)


# -- TP / CP rules and bytes -----------------------------------------------------------------
def test_tp_must_divide_kv_heads_or_be_a_multiple():
    m = ModelSpec("g3", 4, 3072, 24, 4096, 1000, gated_mlp=True, bias=False, kv_heads=3)
    with pytest.raises(ValueError, match=r"tp must divide the K/V heads or be a multiple of them: 3 K/V heads, "
                                         r"tp=2") as err:
        check_plan(m, make_cluster("dgx-h100", 2), Plan(tp=2))
    assert "\n" not in str(err.value)


def test_ulysses_needs_the_kv_heads_of_a_tp_rank_divisible_by_cp():
    with pytest.raises(ValueError, match=r"n_kv_head % cp == 0.*8 K/V heads") as err:
        check_plan(LLAMA3_8B, make_cluster("dgx-h100", 16), Plan(cp=16, cp_impl="ulysses"))
    assert "\n" not in str(err.value)
    check_plan(LLAMA3_8B, make_cluster("dgx-h100", 8), Plan(cp=8, cp_impl="ulysses"))


@pytest.mark.parametrize("impl", ["ring", "all-gather"])
def test_gqa_makes_cp_cheaper_in_proportion_to_kv_width(impl):
    m = LLAMA3_8B.with_(seq_len=131072)
    plan = Plan(tp=2, cp=8, cp_impl=impl, sequence_parallel=True)
    gqa, mha = cp_layer_bytes(m, plan), cp_layer_bytes(m.with_(kv_heads=0), plan)
    assert gqa.forward / mha.forward == pytest.approx(m.kv_width / MHA.kv_width)  # 8 of 32 heads


def test_ulysses_bytes_shrink_only_in_k_and_v():
    m = LLAMA3_8B
    plan = Plan(cp=8, cp_impl="ulysses")
    gqa, mha = cp_layer_bytes(m, plan), cp_layer_bytes(MHA, plan)
    assert gqa.forward / mha.forward == pytest.approx((2 * 4096 + 2 * 1024) / (4 * 4096))  # Q, O whole


# -- KV cache --------------------------------------------------------------------------------
def test_kv_cache_uses_the_models_kv_heads_and_window():
    assert kv_cache_bytes_per_token("mixtral-8x7b") == 2 * 32 * 8 * 128 * 2  # 8 K/V heads, not 32
    assert kv_cache_bytes_per_token(LLAMA3_8B) == kv_cache_bytes_per_token(MHA) / 4
    mistral = get_model("mistral-7b")  # window 4096 on every layer
    per = kv_cache_bytes_per_token(mistral)
    assert kv_cache_bytes(mistral, 2048) == 2048 * per
    assert kv_cache_bytes(mistral, 32768) == 4096 * per  # the rolling buffer stops growing
    oss = get_model("gpt-oss-20b")  # 128-token window on 12 of 24 layers
    assert kv_cache_bytes(oss, 4096) == kv_cache_bytes_per_token(oss) / 24 * (12 * 4096 + 12 * 128)


# -- every preset prices; explain says the attention -----------------------------------------
def _plan_for(m: ModelSpec) -> Plan:
    """64 GPUs: the largest tp of 8, 4, 2 dividing the heads, hidden and MLP widths (Qwen2.5-7B: 28
    heads, tp=4), pp=4 for a dense model, ep=8 for an MoE one."""
    tp = next(t for t in (8, 4, 2) if not (m.heads % t or m.hidden % t or m.ffn % t))
    if m.moe is not None:
        return Plan(dp=64 // tp, tp=tp, ep=8, sequence_parallel=True, zero=1, global_batch=64)
    return Plan(dp=16 // tp, tp=tp, pp=4, zero=1, sequence_parallel=True, global_batch=64, recompute="selective")


@pytest.mark.parametrize("name", sorted(MODERN_MODELS) + ["deepseek-v3", "mixtral-8x7b"])
def test_every_modern_preset_prices(name):
    m = get_model(name)
    est = estimate(m, make_cluster("dgx-h100", 64), _plan_for(m))
    assert est.step_time > 0 and 0 < est.mfu < 1 and est.memory_total > 0
    assert est.explain()


@pytest.mark.parametrize("seq, cp, dp", [(8192, 1, 128), (131072, 16, 8)])
def test_llama3_405b_at_its_published_layouts(seq, cp, dp):
    """Dubey et al. 2024, Table 4: 16,384 H100s, tp=8 pp=16, cp=1 at 8K and cp=16 at 128K (126
    layers on 16 stages: the most loaded stage's ceil(126/16) = 8 layers)."""
    m = get_model("llama-3.1-405b").with_(seq_len=seq)
    plan = Plan(dp=dp, tp=8, pp=16, cp=cp, sequence_parallel=True, zero=1, global_batch=16 * dp,
                cp_impl="all-gather")
    est = estimate(m, make_cluster("dgx-h100", 16384), plan)
    assert 0.2 < est.mfu < 0.7


def test_explain_says_the_attention():
    text = estimate(LLAMA3_8B, make_cluster("dgx-h100", 8), Plan(dp=8)).explain()
    assert "attention: GQA 8 KV heads of 32" in text.splitlines()[0]
    assert "window 128 on 12 of 24 layers" in describe(get_model("gpt-oss-20b"))
    assert "window" not in describe(get_model("mistral-7b").with_(seq_len=4096))  # w >= s bounds nothing


def test_search_keeps_only_layouts_the_kv_heads_allow():
    """search generates no tp the K/V heads refuse (3 K/V heads: tp=1 only of 1, 2, 4, 8), and no
    Ulysses plan whose TP rank holds fewer K/V heads than cp (Llama 3.1 8B at cp=16: ring only)."""
    from parlab.costmodel import search

    m = ModelSpec("g3", 8, 3072, 24, 4096, 1000, gated_mlp=True, bias=False, kv_heads=3)
    res = search(m, make_cluster("dgx-h100", 16), global_batch=64)
    assert res.valid == res.tried and {e.plan.tp for e in res.ranked} == {1}
    long = LLAMA3_8B.with_(seq_len=131072)
    res = search(long, make_cluster("dgx-h100", 64), global_batch=64, cp=[16], cp_impls=["ulysses", "ring"])
    assert res.ranked and {e.plan.cp_impl for e in res.ranked} == {"ring"}


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen3-32b", "gpt-oss-20b"])
def test_tp_layer_linears_have_the_attention_widths(name):
    """QKV h -> a d + 2 g d, output a d -> h: the matrices hold the attention's weights, biases,
    norms and sinks aside (``tensor_parallel.layer_linears``)."""
    from parlab.costmodel.pricing.attention_terms import projection_weights
    from parlab.costmodel.pricing.tensor_parallel.megatron import layer_linears

    m = get_model(name)
    qkv, out = layer_linears(m)[:2]
    assert qkv[1] * qkv[2] + out[1] * out[2] == projection_weights(m)
    assert out[1] == m.q_width


def test_inference_attention_flops_use_the_query_width():
    from parlab.costmodel.pricing.inference import forward_flops_per_token

    m = get_model("qwen3-32b")  # a d = 8192, h = 5120
    assert forward_flops_per_token(m, 1000) - forward_flops_per_token(m, 0) == 2 * m.layers * 1000 * 8192


def test_decode_reads_at_most_the_window_of_cache():
    """generation_time: a windowed layer reads min(w, p + t) cached tokens at step t."""
    from parlab.costmodel.pricing.inference import generation_time

    mistral = get_model("mistral-7b")
    full = mistral.with_(window=0)
    short = generation_time(mistral, "h100-sxm", 100, 1000), generation_time(full, "h100-sxm", 100, 1000)
    assert short[0].kv_s == pytest.approx(short[1].kv_s)  # all inside the 4096 window
    long = generation_time(mistral, "h100-sxm", 1000, 8000), generation_time(full, "h100-sxm", 1000, 8000)
    assert long[0].kv_s == pytest.approx(long[1].kv_s * 4096 / (8000 + 999 / 2))
