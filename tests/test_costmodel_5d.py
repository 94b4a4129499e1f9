"""The 4th and 5th dimensions in the planner: context parallelism (ring attention, Ulysses) and
expert parallelism in ``Plan``, memory, step time, ``search`` and ``explain``, checked against
numbers derived by hand from the papers' formulas; cp = ep = 1 leaves every 3D result as it was."""

import pytest

from parlab.costmodel import (
    Plan,
    activation_bytes_per_layer,
    estimate,
    get_model,
    make_cluster,
    search,
    step_flops,
)
from parlab.costmodel.plan.comm_5d import cp_layer_bytes
from parlab.costmodel.pricing.expert_parallel import all_to_all_bytes_per_layer
from parlab.costmodel.pricing.moe_layer import stage_param_split
from parlab.costmodel.specs.moe import MoESpec

LLAMA_32K = get_model("llama-7b").with_(seq_len=32768)
MIXTRAL = get_model("mixtral-8x7b")
H100 = make_cluster("dgx-h100", 64)


# -- context parallelism ------------------------------------------------------------------------
def test_cp_divides_a_layers_activations_by_cp():
    gpt = get_model("gpt3-175b")  # Korthikanti et al. 2022, Table 2: s b h (34 + 5 a s / h), / cp
    s, h, a = gpt.seq_len, gpt.hidden, gpt.heads
    assert activation_bytes_per_layer(gpt, cp=4) == pytest.approx(s * h * (34 + 5 * a * s / h) / 4)
    for r in ("none", "selective", "full"):
        one = activation_bytes_per_layer(LLAMA_32K, 2, 4, True, r)
        assert activation_bytes_per_layer(LLAMA_32K, 2, 4, True, r, cp=8) == pytest.approx(one / 8)


def test_ring_sends_cp_minus_one_kv_blocks_per_layer():
    sent = cp_layer_bytes(LLAMA_32K, Plan(dp=8, cp=8))  # K and V of s/cp = 4096 tokens x h = 4096, 2 B
    assert sent.forward == 7 * 2 * 4096 * 4096 * 2 == 7 * 67_108_864
    gqa = cp_layer_bytes(MIXTRAL, Plan(dp=8, cp=8))  # 8 K/V heads of 32: a quarter of the block
    assert gqa.forward == 7 * 2 * (4096 // 8) * (8 * 128) * 2
    assert cp_layer_bytes(LLAMA_32K, Plan(dp=4, tp=2, cp=8)).forward == sent.forward / 2  # its TP shard


def test_ulysses_all_to_alls_keep_one_cp_th_on_the_rank():
    sent = cp_layer_bytes(LLAMA_32K, Plan(dp=2, cp=4, cp_impl="ulysses"))
    qkv, out = 8192 * 3 * 4096 * 2, 8192 * 4096 * 2  # b (s/cp) (h + 2 d_kv), b (s/cp) h; 2 bytes
    assert sent.forward == sent.backward == (qkv + out) * 3 / 4


def test_the_ring_hides_its_sends_behind_attention_on_nvlink_and_not_on_a_slow_link():
    plan = Plan(dp=8, cp=8, global_batch=8)
    fast = estimate(LLAMA_32K, H100, plan)
    f = fast.time.facts  # every step hidden: only each layer's last dK/dV hop home is exposed
    assert f["t_cp_send"] < f["t_cp_block"] and fast.time.cp_comm == pytest.approx(f["L"] * f["t_cp_send"])
    slow = estimate(LLAMA_32K, make_cluster("pcie-10gbe", 64), plan.with_(dtype="fp16"))
    f = slow.time.facts
    assert f["t_cp_send"] > f["t_cp_block"]
    per_layer = 7 * 3 * (f["t_cp_send"] - f["t_cp_block"]) + f["t_cp_send"]  # fwd, bwd (2x), last dK/dV hop
    assert slow.time.cp_comm == pytest.approx(plan.m * f["L"] * per_layer)


def test_cp_ranks_reduce_gradients_and_shard_zero_like_dp_ranks():
    """Megatron-Core's "dp-cp" group: dp=4 x cp=2 reduces and shards over the same 8 ranks as dp=8."""
    a = estimate(LLAMA_32K, H100, Plan(dp=4, cp=2, tp=8, zero=1, global_batch=16))
    b = estimate(LLAMA_32K, H100, Plan(dp=8, tp=8, zero=1, global_batch=16))
    assert a.stage.optimizer == pytest.approx(b.stage.optimizer)
    assert a.time.facts["dp_total"] == pytest.approx(b.time.facts["dp_total"])
    assert a.stage.activations.layers == pytest.approx(b.stage.activations.layers / 2)


# -- expert parallelism -------------------------------------------------------------------------
def test_experts_are_split_by_ep_and_sharded_over_expert_dp():
    # Mixtral: 32 MoE layers x 8 experts of 3 x 4096 x 14336 = 176,160,768 weights (Jiang et al. 2024)
    dense, experts = stage_param_split(MIXTRAL, 1, 1, "first", 8)
    assert experts == 32 * 176_160_768
    assert stage_param_split(MIXTRAL, 1, 1, "first", 1)[1] == 8 * experts
    assert dense + 8 * experts == MIXTRAL.num_params()
    est = estimate(MIXTRAL, H100, Plan(dp=64, ep=8, zero=1, global_batch=64))  # edp = 64 / 8 = 8
    assert est.stage.optimizer == pytest.approx(12 * (dense / 64 + experts / 8))


def test_moe_model_flops_count_the_active_parameters():
    """6 N_active per token (Kaplan et al. 2020) for the weights, + the attention scores 12 l s^2 h
    per sequence (Narayanan et al. 2021, Eq. 3), the input embedding doing no matmul."""
    m = MIXTRAL
    T, L, h = m.seq_len, m.layers, m.hidden
    weights = m.active_params() - m.vocab * h - L * 2 * h - h  # minus the input embedding and norms
    model, _ = step_flops(m, 1)
    assert model == pytest.approx(6 * T * weights + 12 * L * T * T * h)
    assert model < 0.3 * 6 * T * m.num_params()  # 12.9B of 46.7B used per token, not 6 N_total


def test_ep_prices_expert_parallels_all_to_alls_for_the_ranks_tokens():
    plan = Plan(dp=16, tp=2, cp=2, ep=8, sequence_parallel=True, global_batch=32)
    est = estimate(MIXTRAL, H100, plan)
    f = est.time.facts
    assert f["ep_tokens"] == 4096 // (2 * 2)  # b s / (cp t)
    assert f["ep_bytes_layer"] == all_to_all_bytes_per_layer(1024, 4096, MIXTRAL.moe, 8)
    assert est.time.ep_comm == pytest.approx(plan.m * 32 * f["t_ep_layer"]) and est.time.ep_comm > 0


# -- plan rules ---------------------------------------------------------------------------------
@pytest.mark.parametrize("model, plan, rule", [
    (LLAMA_32K.with_(seq_len=1000), Plan(dp=8, cp=8), r"seq_len % 2\*cp == 0 .*16 equal chunks.*seq_len=1000, cp=8"),
    (LLAMA_32K, Plan(dp=1, tp=8, cp=8, cp_impl="ulysses"), r"n_head % cp == 0 .*n_head=4, cp=8 .*tp=8 TP ranks: 32 / 8"),
    (MIXTRAL, Plan(dp=4, tp=2, cp=8, cp_impl="ulysses"), r"n_kv_head % cp == 0 .*n_kv_head=4, cp=8"),
    (MIXTRAL, Plan(dp=2, tp=16, cp=2, ep=2, sequence_parallel=True),  # was a raw "n_kv_head ... got 0"
     r"tp must divide the K/V heads with cp > 1: 8 K/V heads are not divisible by tp=16"),
    (MIXTRAL.with_(moe=MoESpec(6, 2, 14336)), Plan(dp=64, ep=4),
     r"6 experts are not divisible by ep=4"),
    (LLAMA_32K, Plan(dp=64, ep=2), r"ep=2 splits experts, and llama-7b is a dense model"),
    (MIXTRAL, Plan(dp=64, ep=8, zero=3), r"ZeRO-3 of an MoE model is not modelled"),
    (LLAMA_32K, Plan(dp=8, cp=4), r"dp x tp x pp x cp must equal the number of GPUs: 8 x 1 x 1 x 4 = 32 != 64"),
])
def test_bad_5d_plans_name_the_value_and_the_rule(model, plan, rule):
    with pytest.raises(ValueError, match=rule):
        estimate(model, H100, plan)


@pytest.mark.parametrize("fields, rule", [
    (dict(dp=3, ep=2), r"ep must divide dp x cp .*ep=2 does not divide dp=3 x cp=1 = 3"),
    (dict(dp=8, tp=2, ep=8), r"expert parallelism with tensor parallelism needs sequence_parallel=True"),
    (dict(cp=0), r"cp must be"),
    (dict(cp=2, cp_impl="tree"), r"unknown cp_impl 'tree'; allowed: ring, ulysses"),
])
def test_bad_5d_plan_fields_name_the_rule(fields, rule):
    with pytest.raises(ValueError, match=rule):
        Plan(**fields)


# -- the faces: describe, explain, search --------------------------------------------------------
def test_describe_and_explain_show_the_new_terms_only_where_they_are():
    plan = Plan(dp=4, tp=2, cp=4, cp_impl="ulysses", ep=8, sequence_parallel=True, pp=2, zero=1, global_batch=16)
    assert plan.describe().startswith("dp=4 tp=2 pp=2 cp=4(Ulysses) ep=8 ZeRO-1")
    text = estimate(MIXTRAL.with_(seq_len=32768), H100, plan).explain()
    assert "CP communication (exposed)" in text and "all-to-alls of Q, K, V" in text and "Jacobs et al. 2023" in text
    assert "EP all-to-all" in text and "top-2 of 8 experts" in text and "over edp 2" in text
    three_d = estimate("llama-7b", H100, Plan(dp=8, tp=8, global_batch=64))
    assert "CP communication" not in three_d.explain() and "EP" not in " ".join(three_d.time_terms())


def test_search_tries_cp_for_long_sequences_and_ep_for_moe_models_only():
    short = search("llama-7b", make_cluster("dgx-h100", 16), 16, top=3, micro_batches=[1], zero_stages=[1])
    assert all(e.plan.cp == 1 and e.plan.ep == 1 for e in short.ranked)
    long = search(LLAMA_32K.with_(seq_len=131072), make_cluster("dgx-h100", 16), 2, top=1, micro_batches=[1],
                  zero_stages=[1], recompute=["none"])
    assert long.best().plan.cp > 1  # a 128K sequence: activations only fit split
    moe = search(MIXTRAL, make_cluster("dgx-h100", 16), 16, top=1, micro_batches=[1], zero_stages=[1],
                 recompute=["none"])
    assert moe.best().plan.ep > 1
    assert search(MIXTRAL, make_cluster("dgx-h100", 16), 16, top=1, micro_batches=[1], zero_stages=[1],
                  recompute=["none"], ep=[1]).best().step_time > moe.best().step_time


def test_deepseek_v3_on_its_own_layout_holds_four_experts_per_gpu():
    """DeepSeek-V3's training layout (DeepSeek-AI 2024, Sec. 3.2): 16-way PP, 64-way EP, ZeRO-1 DP on
    2,048 GPUs (priced in bf16 on H100s: it fits with full recompute only; the run used FP8 and
    recomputed RMSNorm and MLA up-projections). 256 experts / 64 = 4 per GPU, of 3 x 7168 x 2048 = 44,040,192 weights, on each of the
    last stage's ceil(61 / 16) = 4 MoE layers."""
    v3 = get_model("deepseek-v3")
    assert stage_param_split(v3, 1, 16, "last", 64)[1] == 4 * 4 * 44_040_192
    assert stage_param_split(v3, 1, 16, "first", 64)[1] == 1 * 4 * 44_040_192  # 3 dense layers first
    plan = Plan(dp=128, pp=16, ep=64, zero=1, global_batch=15360, recompute="full")  # its batch, Sec. 4.2
    est = estimate(v3, make_cluster("dgx-h100", 2048), plan)
    assert est.plan.edp == 2 and est.time.ep_comm > 0 and est.fits
    assert not estimate(v3, make_cluster("dgx-h100", 2048), plan.with_(recompute="none")).fits


def test_chapter_13s_scenarios_split_activations_and_price_both_moe_models():
    from parlab.costmodel.answers.scenarios_5d import memory_vs_sequence, moe_pricing

    series = memory_vs_sequence("llama-7b", [8192, 16384], [1, 2])
    for cp1, cp2 in zip(series[1], series[2], strict=True):  # the same states, half the activations
        assert cp2.stage.weights == cp1.stage.weights
        assert cp2.stage.activations.layers == pytest.approx(cp1.stage.activations.layers / 2)
    mixtral, v3 = moe_pricing()
    assert mixtral.estimate.fits and v3.estimate.fits
    assert round(mixtral.total_params / 1e9, 1) == 46.7 and round(v3.total_params / 1e9) == 671  # the papers'
    assert 0 < mixtral.ep_share < 1 and v3.expert_params_per_gpu == 4 * 4 * 44_040_192
