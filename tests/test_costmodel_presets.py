"""Today's model presets and the attention fields of ModelSpec: each preset's parameter count equals
its published total (``modern_presets.PUBLISHED``), a GQA / head_dim / windowed model counts every
matrix once, and bad attention fields are one line naming the value (their pricing:
``test_costmodel_gqa.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parlab.costmodel import get_model
from parlab.costmodel.specs.attention import attention_param_count
from parlab.costmodel.specs.catalogue import MODELS
from parlab.costmodel.specs.models import DENSE_MODELS, ModelSpec
from parlab.costmodel.specs.modern_presets import MODERN_MODELS, PUBLISHED
from parlab.costmodel.specs.moe import MoEModel, MoESpec


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_count_equals_the_published_total(name):
    published, rounding, which, source = PUBLISHED[name]
    m = get_model(name)
    n = m.num_params() if which == "total" else m.non_embedding_params()
    assert source and m.source
    if rounding == 0:
        assert n == published, f"{name}: {n:,} != {published:,} ({source})"
    else:  # a rounded figure: the count rounds to it
        assert abs(n - published) <= rounding, f"{name}: {n:,} does not round to {published:,} ({source})"


def test_every_modern_preset_is_checked_and_in_the_catalogue():
    assert set(PUBLISHED) == set(MODERN_MODELS)
    for name in ("llama-3.1-405b", "qwen3-235b-a22b", "gpt-oss-120b", "nemotron-4-340b", "deepseek-v3"):
        assert name in MODELS
    for name in DENSE_MODELS:  # the guide's presets stay, with their counts
        assert MODELS[name] is DENSE_MODELS[name]


def test_llama_3_1_8b_is_no_longer_counted_as_multi_head():
    """The issue's example: 8.84B with multi-head attention, 8.03B with its 8 K/V heads."""
    m = get_model("llama-3.1-8b")
    assert m.kv_heads == 8 and m.kv_width == 1024 and m.q_width == 4096
    assert m.with_(kv_heads=0).num_params() == 8_835_567_616
    assert m.num_params() == 8_030_261_248


def test_deepseek_v3_counts_671b_total_and_37b_active():
    """DeepSeek-AI 2024, Sec. 4.2 (671B / 37B, without the multi-token-prediction module). The HF
    checkpoint also holds 58 x 256 router correction biases (e_score_correction_bias), 14,848
    parameters the preset leaves out (671,026,404,352 vs 671,026,419,200). Active: 37.55B, the
    report's "37B" truncated."""
    m = get_model("deepseek-v3")
    assert round(m.num_params() / 1e9) == 671 and 37e9 <= m.active_params() < 38e9
    assert 671_026_419_200 - m.num_params() == 58 * 256


def test_gpt_oss_windows_every_other_layer_and_counts_its_biases_and_sinks():
    m = get_model("gpt-oss-20b")
    assert (m.window_layers, m.full_layers) == (12, 12)
    shape = m.attention_shape()
    assert (shape.q_width, shape.kv_width, shape.window) == (4096, 512, 128)
    bare = m.with_(attention_bias=False, sinks=False)
    assert m.num_params() - bare.num_params() == 24 * (4096 + 2 * 512 + 2880 + 64)


def test_size_picks_the_one_guide_preset_and_names_two():
    assert get_model("7B").name == "llama-7b"
    assert get_model("6.7B").name == "gpt3-6.7b"
    with pytest.raises(ValueError, match="'13b' is ambiguous: gpt3-13b and llama-13b"):
        get_model("13b")
    assert get_model("8B").name == "gpt-8b"  # no guide preset of 8B: a GPT-style shape, named so
    assert get_model("Llama-3-8B") is get_model("llama-3.1-8b")  # the same shape (Dubey et al. 2024, Table 3)


@pytest.mark.parametrize("fields, match", [
    (dict(kv_heads=5), "kv_heads=5 must divide heads=32"),
    (dict(head_dim=-1), "head_dim"),
    (dict(window_pattern=2), "window_pattern=2 .* needs a window > 0"),
    (dict(window=128, window_pattern=9), "window_pattern=9 .* must be <= layers=8"),
    (dict(window=-1), "window"),
    (dict(qk_norm="yes"), "qk_norm"),
])
def test_bad_attention_fields_are_one_line_naming_the_value(fields, match):
    with pytest.raises((ValueError, TypeError), match=match) as err:
        ModelSpec("t", 8, 4096, 32, 2048, 32000, **fields)
    assert "\n" not in str(err.value)


def test_head_dim_frees_the_attention_width_from_hidden():
    with pytest.raises(ValueError, match="hidden size 4001 must be divisible by the number of heads 32 .or give"):
        ModelSpec("t", 8, 4001, 32, 2048, 32000)
    assert ModelSpec("t", 8, 4001, 32, 2048, 32000, head_dim=128).q_width == 4096


def test_head_dim_and_window_shape_the_attention():
    m = ModelSpec("t", 12, 2048, 32, 4096, 1000, kv_heads=4, head_dim=128, window=1024, window_pattern=6)
    assert (m.q_width, m.kv_width, m.window_layers, m.full_layers) == (4096, 512, 10, 2)
    assert m.with_(seq_len=1024).window_layers == 0  # a window as long as the sequence bounds nothing
    assert m.with_(window_pattern=0).window_layers == 12
    assert ModelSpec("t", 2, 4096, 32, 64, 10).with_(hidden=2048).head_dim == 64  # a derived head_dim follows


def test_moe_and_dense_share_one_attention_count():
    base = ModelSpec("b", 4, 2048, 32, 4096, 1000, head_dim=128, qk_norm=True, gated_mlp=True, bias=False)
    moe = MoEModel("m", base, MoESpec(8, 2, 768), kv_heads=4)
    assert moe._attention() == base.with_(kv_heads=4).attention_layer_params() == attention_param_count(
        2048, 32, 4, 128, qk_norm=True)


def test_router_bias_adds_one_per_expert():
    moe = MoESpec(32, 4, 2880, bias=True)
    assert MoESpec(32, 4, 2880, router_bias=True).router_params(2880) - moe.router_params(2880) == 32


@settings(max_examples=80, deadline=None)
@given(layers=st.integers(1, 6), g=st.integers(1, 8), group=st.integers(1, 4), d=st.sampled_from([16, 32, 64]),
       h=st.sampled_from([64, 128, 256]), f=st.integers(1, 512), V=st.integers(1, 5000),
       tied=st.booleans(), qk=st.booleans(), qkv_bias=st.booleans())
def test_gqa_count_is_the_sum_of_its_matrices(layers, g, group, d, h, f, V, tied, qk, qkv_bias):
    """For any shape: embedding V h, per layer Q h(a d), K and V h(g d), O (a d)h, gate/up/down 3hf,
    two RMSNorms h (+2d QK-norms, +(a d + 2 g d) Q/K/V biases); final norm h; output V h if untied."""
    a = g * group
    m = ModelSpec("p", layers, h, a, 128, V, f, gated_mlp=True, bias=False, learned_pos=False,
                  tied_embeddings=tied, kv_heads=g, head_dim=d, qk_norm=qk, qkv_bias=qkv_bias)
    matrices = [h * a * d, h * g * d, h * g * d, a * d * h, h * f, h * f, f * h]
    vectors = [h, h] + ([d, d] if qk else []) + ([a * d, g * d, g * d] if qkv_bias else [])
    expect = V * h + layers * (sum(matrices) + sum(vectors)) + h + (0 if tied else V * h)
    assert m.num_params() == expect
