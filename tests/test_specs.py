"""The first slice of the cost model: shapes, parameter counts, presets, model-state bytes,
activations per layer and training FLOPs, each against its published source."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parlab.costmodel import (
    GPUS,
    MODELS,
    PRECISIONS,
    RECOMPUTE,
    GiB,
    ModelSpec,
    activation_bytes_per_layer,
    bytes_per_param,
    get_gpu,
    get_model,
    implied_utilisation,
    largest_model,
    megatron_eq2_params,
    megatron_flops_per_iteration,
    model_state_memory,
    parse_size,
    train_flops_6nd,
    training_seconds,
)


# -- parameter counts ----------------------------------------------------------------------------
@pytest.mark.parametrize("name, published", [
    ("llama-7b", 6_738_415_616),      # HF LlamaForCausalLM, LLaMA-7B
    ("llama-65b", 65_285_660_672),    # HF LlamaForCausalLM, LLaMA-65B
    ("bloom-176b", 176_247_271_424),  # BLOOM model card
    ("chatglm-6b", 6_173_286_400),    # THUDM/chatglm-6b
])
def test_preset_parameter_counts_match_published_checkpoints(name, published):
    assert MODELS[name].num_params() == published


@pytest.mark.parametrize("name", ["gpt3-175b", "gpt3-13b", "mt-nlg-530b"])
def test_gpt_count_is_megatron_eq2_plus_the_final_layernorm(name):
    m = MODELS[name]
    assert m.num_params() == pytest.approx(megatron_eq2_params(m) + 2 * m.hidden, rel=1e-12)


def test_mt_nlg_530b_matches_megatron_table_1():
    assert MODELS["mt-nlg-530b"].num_params() / 1e9 == pytest.approx(529.6, abs=0.05)


def test_gpt_block_has_12h2_plus_13h_parameters():
    m = ModelSpec("t", layers=2, hidden=64, heads=4, seq_len=16, vocab=100)
    assert m.params_per_layer() == 12 * 64**2 + 13 * 64


def test_swiglu_block_without_biases():
    m = ModelSpec("t", 1, 64, 4, 16, 100, ffn_hidden=172, gated_mlp=True, bias=False,
                  learned_pos=False, tied_embeddings=False)
    assert m.params_per_layer() == 4 * 64**2 + 3 * 64 * 172 + 2 * 64


# -- presets and parsing -------------------------------------------------------------------------
@pytest.mark.parametrize("text, value", [("7B", 7e9), ("350m", 3.5e8), ("1.5T", 1.5e12), (" 13 b ", 13e9)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["seven", "7", "7GB", "-7B", "0B"])
def test_parse_size_rejects_non_sizes(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_size_resolves_to_the_only_preset_of_that_size():
    assert get_model("7B").name == "llama-7b"
    assert get_model("175b").name == "gpt3-175b"


def test_size_without_preset_gets_a_gpt_shape_of_about_that_size():
    m = get_model("30B")
    assert m.num_params() == pytest.approx(30e9, rel=0.05)
    assert m.hidden % m.heads == 0


def test_unknown_model_names_the_value_and_the_presets():
    with pytest.raises(ValueError, match=r"unknown model 'gpt5'.*llama-7b"):
        get_model("gpt5")


def test_modelspec_rejects_heads_not_dividing_hidden():
    with pytest.raises(ValueError, match="divisible"):
        ModelSpec("bad", 2, 100, 3, 16, 10)


@pytest.mark.parametrize("field", ["layers", "hidden", "seq_len", "vocab"])
def test_modelspec_rejects_non_positive_sizes(field):
    kwargs = dict(name="bad", layers=2, hidden=64, heads=4, seq_len=16, vocab=10)
    kwargs[field] = 0
    with pytest.raises(ValueError, match=field):
        ModelSpec(**kwargs)


def test_gpu_presets_and_aliases():
    assert get_gpu("a100") is GPUS["a100-80gb"]
    assert GPUS["a100-80gb"].memory_bytes == 80 * GiB
    with pytest.raises(ValueError, match=r"unknown GPU 'tpu-v5p'.*h100-sxm"):
        get_gpu("tpu-v5p")


def test_v100_has_no_bf16():
    with pytest.raises(ValueError, match="bf16"):
        GPUS["v100-32gb"].peak_flops("bf16")


# -- model states (ZeRO paper, Section 3.1; guide 1.1, 1.14) ---------------------------------------
def test_guide_1_1_gpt3_fp32_states_are_2p8_tb():
    m = model_state_memory(175e9, "fp32", "adam")
    assert (m.weights, m.grads, m.optimizer_states, m.total) == (700e9, 700e9, 1400e9, 2.8e12)


@pytest.mark.parametrize("dtype, optimizer, per_param", [
    ("mixed", "adam", 16), ("mixed-fp32-grad", "adam", 18), ("fp32", "adam", 16),
    ("bf16", "adam", 8), ("mixed", "sgd", 8), ("fp32", "momentum", 12), ("fp16", "none", 2),
])
def test_bytes_per_param(dtype, optimizer, per_param):
    assert bytes_per_param(dtype, optimizer) == per_param


def test_inference_keeps_only_weights():
    m = model_state_memory(1e9, "fp16", "none")
    assert (m.grads, m.master, m.optimizer_states) == (0, 0, 0)


def test_guide_1_14_limits_of_an_80_gb_card():
    assert largest_model(80e9, "fp16", "none") == 40e9
    assert largest_model(80e9, "mixed", "adam") == 5e9


@pytest.mark.parametrize("bad, message", [
    (dict(dtype="fp8"), "unknown dtype 'fp8'; allowed: fp32, mixed"),
    (dict(optimizer="lion"), "unknown optimizer 'lion'; allowed: adam"),
    (dict(n_params=0), "n_params must be a positive number, got 0"),
    (dict(n_params=-1e9), "n_params must be a positive number"),
])
def test_model_state_memory_rejects_bad_input_by_name(bad, message):
    kwargs = dict(n_params=1e9, dtype="mixed", optimizer="adam") | bad
    with pytest.raises(ValueError, match=message):
        model_state_memory(**kwargs)


def test_explain_shows_every_term_and_the_source():
    text = model_state_memory(7e9, "mixed").explain()
    for word in ("weights", "gradients", "master", "optimizer states", "ZeRO"):
        assert word in text


# -- activations (Korthikanti et al. 2022, Table 2) ---------------------------------------------
def test_table2_no_parallelism():
    m = MODELS["gpt3-175b"]
    s, h, a = m.seq_len, m.hidden, m.heads
    assert activation_bytes_per_layer(m, 1) == s * h * (34 + 5 * a * s / h)


def test_table2_tensor_parallel_rows():
    m, t, b = MODELS["gpt3-175b"], 8, 2
    sbh, a, s, h = m.seq_len * b * m.hidden, m.heads, m.seq_len, m.hidden
    assert activation_bytes_per_layer(m, b, t) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert activation_bytes_per_layer(m, b, t, True) == pytest.approx(sbh * (34 / t + 5 * a * s / (h * t)))
    assert activation_bytes_per_layer(m, b, t, False, "selective") == pytest.approx(sbh * (10 + 24 / t))
    assert activation_bytes_per_layer(m, b, t, True, "selective") == pytest.approx(sbh * 34 / t)
    assert activation_bytes_per_layer(m, b, t, False, "full") == 2 * sbh
    assert activation_bytes_per_layer(m, b, t, True, "full") == 2 * sbh / t


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(list(MODELS.values())), b=st.integers(1, 16),
       t=st.sampled_from([1, 2, 4, 8]), sp=st.booleans())
def test_recomputation_and_sequence_parallel_never_add_memory(model, b, t, sp):
    none, sel, full = (activation_bytes_per_layer(model, b, t, sp, r) for r in RECOMPUTE)
    assert full <= sel <= none
    assert activation_bytes_per_layer(model, b, t, True) <= activation_bytes_per_layer(model, b, t, False)
    assert activation_bytes_per_layer(model, 2 * b, t, sp) == pytest.approx(2 * none)


def test_unknown_recompute_mode_is_rejected():
    with pytest.raises(ValueError, match="'partial'"):
        activation_bytes_per_layer(MODELS["llama-7b"], recompute="partial")


# -- FLOPs and time ------------------------------------------------------------------------------
def test_6nd():
    assert train_flops_6nd(175e9, 300e9) == 6 * 175e9 * 300e9


def test_megatron_eq3_with_and_without_recompute():
    m = MODELS["gpt3-175b"]
    B, s, L, h, V = 512, m.seq_len, m.layers, m.hidden, m.vocab  # L is the paper's l
    assert megatron_flops_per_iteration(m, B) == pytest.approx(
        96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)))
    # without recompute: 3 passes over the layers instead of 4, the logit layer unchanged
    layers4 = 96 * B * s * L * h * h * (1 + s / (6 * h))
    logits = 6 * B * s * h * V
    assert megatron_flops_per_iteration(m, B, recompute=False) == pytest.approx(layers4 * 3 / 4 + logits)


@settings(max_examples=50, deadline=None)
@given(flops=st.floats(1e18, 1e25), n=st.integers(1, 4096), u=st.floats(0.01, 1.0),
       gpu=st.sampled_from(list(GPUS)), dtype=st.sampled_from(["mixed", "fp32"]))
def test_implied_utilisation_inverts_training_seconds(flops, n, u, gpu, dtype):
    seconds = training_seconds(flops, n, gpu, u, dtype)
    assert implied_utilisation(flops, seconds, n, gpu, dtype) == pytest.approx(u)


@pytest.mark.parametrize("bad", [dict(n_gpus=0), dict(n_gpus=1.5), dict(utilisation=0), dict(utilisation=1.2),
                                 dict(gpu="tpu")])
def test_training_seconds_rejects_bad_input(bad):
    kwargs = dict(total_flops=1e21, n_gpus=8, gpu="a100", utilisation=0.5) | bad
    with pytest.raises(ValueError):
        training_seconds(**kwargs)


def test_every_precision_has_a_known_compute_dtype():
    for p in PRECISIONS.values():
        assert math.isfinite(GPUS["a100-80gb"].peak_flops(p.compute_dtype))
