"""estimate(): every formula against its source, exactly, and properties that hold for any plan."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parlab.costmodel import (
    DEFAULT,
    LinkSpec,
    ModelSpec,
    Plan,
    estimate,
    get_model,
    in_flight_microbatches,
    layer_params_per_gpu,
    make_cluster,
    megatron_eq2_params,
    megatron_flops_per_iteration,
    stage_activations,
    stage_params,
    step_flops,
    zero_model_states,
)
from parlab.costmodel.search.ranking import factorizations

GPT3 = get_model("gpt3-175b")


# -- parameters: Megatron-LM 2021 Eq. 2 and the TP/PP split ---------------------------------------
@pytest.mark.parametrize("name", ["gpt3-175b", "llama-7b", "bloom-176b", "chatglm-6b"])
def test_one_stage_without_tp_holds_exactly_the_model(name):
    m = get_model(name)
    assert stage_params(m, 1, 1, "first") == m.num_params()
    assert layer_params_per_gpu(m, 1) == m.params_per_layer()


def test_gpt_stage_params_are_eq2_plus_the_final_layernorm():
    assert stage_params(GPT3, 1, 1, "last") == pytest.approx(megatron_eq2_params(GPT3) + 2 * GPT3.hidden, rel=1e-12)


def test_tp_splits_the_matrices_and_replicates_norms_and_row_biases():
    h = GPT3.hidden
    assert layer_params_per_gpu(GPT3, 8) == pytest.approx((12 * h * h + 7 * h) / 8 + 6 * h)


def test_pp_stages_hold_their_layers_plus_an_end_each():
    h, V = GPT3.hidden, GPT3.vocab
    first, last = stage_params(GPT3, 8, 8, "first"), stage_params(GPT3, 8, 8, "last")
    layers = 12 * layer_params_per_gpu(GPT3, 8)
    assert first == pytest.approx(layers + V * h / 8 + GPT3.seq_len * h)
    assert last == pytest.approx(layers + V * h / 8 + 2 * h)  # tied output copy + final LayerNorm


# -- FLOPs: Megatron-LM 2021 Eq. 3 -----------------------------------------------------------------
@pytest.mark.parametrize("name", ["gpt3-175b", "mt-nlg-530b", "gpt3-6.7b"])
def test_step_flops_are_eq3_exactly(name):
    m = get_model(name)
    model_flops, hw_flops = step_flops(m, 512, "full")
    assert hw_flops == pytest.approx(megatron_flops_per_iteration(m, 512, recompute=True), rel=1e-12)
    assert model_flops == pytest.approx(megatron_flops_per_iteration(m, 512, recompute=False), rel=1e-12)
    assert step_flops(m, 512, "none") == (model_flops, model_flops)


def test_selective_recompute_repeats_only_the_attention_scores():
    m, B = GPT3, 8
    extra = step_flops(m, B, "selective")[1] - step_flops(m, B, "none")[1]
    assert extra == pytest.approx(m.layers * 4 * B * m.seq_len**2 * m.hidden)


# -- ZeRO: the paper's example ---------------------------------------------------------------------
def test_zero_paper_example_7p5b_64way():
    gb = {z: zero_model_states(7.5e9, 64, z).total / 1e9 for z in range(4)}
    assert gb[0] == 120
    assert round(gb[1], 1) == 31.4 and round(gb[2], 1) == 16.6 and round(gb[3], 1) == 1.9
    assert gb[1] == 4 * 7.5 + 12 * 7.5 / 64  # 4 Psi + K Psi / Nd


def test_zero_shards_over_the_dp_group_not_over_all_gpus():
    c = make_cluster("dgx-a100", 64)
    est = estimate(GPT3, c, Plan(dp=8, tp=8, zero=1, recompute="full"))
    P = stage_params(GPT3, 8, 1, "first")
    assert est.stage.optimizer == pytest.approx(P * 12 / 8)
    assert est.stage.weights == pytest.approx(P * 2)


# -- activations: Korthikanti et al. 2022 ----------------------------------------------------------
def test_korthikanti_table2_per_layer_in_the_estimate():
    s, b, h, a, t = GPT3.seq_len, 1, GPT3.hidden, GPT3.heads, 8
    cases = {("none", False): s * b * h * (10 + 24 / t + 5 * a * s / (h * t)),
             ("none", True): s * b * h * (34 / t + 5 * a * s / (h * t)),
             ("selective", True): s * b * h * 34 / t,
             ("full", False): 2 * s * b * h,
             ("full", True): 2 * s * b * h / t}
    for (rec, sp), want in cases.items():
        plan = Plan(tp=t, pp=8, micro_batches=8, recompute=rec, sequence_parallel=sp)
        assert stage_activations(GPT3, plan, "first").per_layer == pytest.approx(want, rel=1e-12)


def test_1f1b_first_stage_holds_p_microbatches_so_l_layers_worth():
    plan = Plan(tp=8, pp=8, micro_batches=64, recompute="selective", sequence_parallel=True)
    act = stage_activations(GPT3, plan, "first")
    assert act.in_flight == 8 and act.layers == pytest.approx(GPT3.layers * act.per_layer)
    assert in_flight_microbatches(plan, "last") == 1
    assert in_flight_microbatches(plan.with_(micro_batches=3), "first") == 3  # pipeline not full


def test_interleaving_costs_1_plus_p_minus_1_over_pv_more_activation_memory():
    base = Plan(tp=8, pp=8, micro_batches=64, recompute="selective", sequence_parallel=True)
    inter = base.with_(schedule="interleaved", chunks=3)
    ratio = stage_activations(GPT3, inter, "first").layers / stage_activations(GPT3, base, "first").layers
    assert ratio == pytest.approx(1 + 7 / (8 * 3))


def test_gpipe_holds_every_microbatch():
    plan = Plan(pp=4, micro_batches=16, schedule="gpipe")
    assert in_flight_microbatches(plan, "first") == in_flight_microbatches(plan, "last") == 16


# -- pipeline bubble -------------------------------------------------------------------------------
@pytest.mark.parametrize("schedule, v", [("1f1b", 1), ("gpipe", 1), ("interleaved", 2), ("interleaved", 4)])
def test_bubble_is_p_minus_1_over_v_m_of_the_ideal_time(schedule, v):
    plan = Plan(dp=2, tp=8, pp=8, micro_batch=1, micro_batches=32, schedule=schedule, chunks=v,
                recompute="full")
    est = estimate(GPT3, make_cluster("dgx-a100", 128), plan)
    ideal = plan.m * est.time.facts["per_mb"]
    assert est.time.bubble / ideal == pytest.approx((8 - 1) / (v * 32))


# -- communication --------------------------------------------------------------------------------
def _fast_cluster(n):
    tiny = LinkSpec("ideal", 25e9, 1e-15)
    return make_cluster("dgx-a100", n, intra=tiny, inter=tiny)


def test_zero3_moves_one_and_a_half_times_the_bytes_of_ddp_with_or_without_recompute():
    """ZeRO paper Sec. 7.2.2: 3 Psi against DDP's 2 Psi. Full recompute adds no gather: the
    backward's gather serves the recomputed forward too (issue 19, item 1)."""
    m = get_model("gpt3-6.7b")
    c = make_cluster("dgx-a100", 8, intra=LinkSpec("ideal", 25e9, 1e-15))  # one node: one link for both
    ddp = estimate(m, c, Plan(dp=8, zero=0, dtype="mixed")).time.facts["dp_total"]
    z3 = estimate(m, c, Plan(dp=8, zero=3, dtype="mixed")).time.facts["dp_total"]
    z3_recompute = estimate(m, c, Plan(dp=8, zero=3, recompute="full", dtype="mixed")).time.facts["dp_total"]
    assert z3 / ddp == pytest.approx(1.5, rel=1e-6)
    assert z3_recompute / ddp == pytest.approx(1.5, rel=1e-6)
    # bf16's fp32 gradients: Megatron's DDP all-reduces 4-byte gradients, DeepSpeed's ZeRO-3
    # reduce-scatters 16-bit ones: 2 x 4 Psi against 2 + 2 + 2
    ddp32 = estimate(m, c, Plan(dp=8, zero=0)).time.facts["dp_total"]
    assert ddp32 / ddp == pytest.approx(2, rel=1e-6)
    assert estimate(m, c, Plan(dp=8, zero=3)).time.facts["dp_total"] == pytest.approx(z3, rel=1e-6)


def test_tp_all_reduces_4_per_layer_6_with_full_recompute():
    c = make_cluster("dgx-a100", 8)
    for rec, n in (("none", 4), ("selective", 4), ("full", 6)):
        f = estimate(GPT3, c, Plan(tp=8, recompute=rec, micro_batch=1)).time.facts
        assert f["n_tp"] == n * GPT3.layers


def test_tp_across_nodes_is_much_slower_than_inside_one():
    m, plan = get_model("gpt3-13b"), Plan(tp=8, recompute="full")
    inside = estimate(m, make_cluster("dgx-a100", 8), plan).time.tp_comm
    one_per_node = make_cluster("dgx-a100", 8, gpus_per_node=1, nics_per_node=1)  # one HDR port each
    across = estimate(m, one_per_node, plan).time.tp_comm
    assert across > 5 * inside


# -- the explanation ------------------------------------------------------------------------------
def test_explain_shows_every_term_with_formula_and_source():
    est = estimate(GPT3, make_cluster("dgx-a100", 1024),
                   Plan(dp=16, tp=8, pp=8, global_batch=1536, schedule="interleaved", chunks=2, recompute="full"))
    text = est.explain()
    for name in [*est.memory_terms(), *est.time_terms()]:
        assert name in text
    for source in ("Korthikanti et al. 2022, Table 2", "Narayanan et al. 2021, Eq. 3", "Thakur et al. 2005",
                   "ZeRO", "matmul_efficiency = 0.7", "nccl-tests"):
        assert source in text
    assert "rank 0 (first pipeline stage" in text
    assert len(est.memory_breakdown()) == 5 and len(est.time_breakdown()) == 8


def test_the_last_stage_is_the_most_loaded_when_the_vocabulary_is_huge():
    bloom = get_model("bloom-176b")
    # fp32 gradients (Megatron's main_grad): no optimizer-step copy, whose peak would otherwise
    # exceed either stage's activations with one micro-batch and even the two stages out
    plan = Plan(tp=8, pp=8, micro_batches=1, micro_batch=1, fp32_grads=True)
    est = estimate(bloom, make_cluster("dgx-a100", 64), plan)
    assert est.stage.stage == "last" and est.rank == 7 * 8


def test_throughput_figures_agree_with_each_other():
    est = estimate(GPT3, make_cluster("dgx-a100", 1024), Plan(dp=16, tp=8, pp=8, global_batch=1536, recompute="full"))
    assert est.tokens_per_s == pytest.approx(1536 * 2048 / est.step_time)
    assert est.mfu == pytest.approx(est.model_tflops_per_gpu / 312)
    assert est.hardware_tflops_per_gpu / est.model_tflops_per_gpu == pytest.approx(
        megatron_flops_per_iteration(GPT3, 1, True) / megatron_flops_per_iteration(GPT3, 1, False))
    assert est.time_to_train(300e9) == pytest.approx(300e9 / est.tokens_per_s)


def test_offload_moves_the_optimizer_to_the_cpu_and_costs_time():
    m, c = get_model("llama-7b"), make_cluster("dgx-a100", 8)
    on_gpu = estimate(m, c, Plan(dp=8, zero=2))
    off = estimate(m, c, Plan(dp=8, zero=2, offload="optimizer"))
    shard = m.num_params() / 8  # the host also keeps the shard's fp32 gradients (ZeRO-Offload)
    assert off.stage.optimizer == 0 and off.stage.cpu == pytest.approx(on_gpu.stage.optimizer + 4 * shard)
    assert off.stage.grads == 0 < on_gpu.stage.grads
    assert off.step_time > on_gpu.step_time and off.time.offload > 0
    params_off = estimate(m, c, Plan(dp=8, zero=3, offload="optimizer+params"))
    assert params_off.stage.weights < estimate(m, c, Plan(dp=8, zero=3)).stage.weights


# -- properties over any valid plan ----------------------------------------------------------------
SMALL = ModelSpec("prop", layers=8, hidden=1024, heads=16, seq_len=512, vocab=32000)


@st.composite
def plans(draw):
    n = draw(st.sampled_from([8, 16, 32, 64]))
    dp, tp, pp = draw(st.sampled_from([f for f in factorizations(n) if f[1] <= 16 and f[2] <= 8]))
    mb = draw(st.sampled_from([1, 2, 4]))
    m = draw(st.sampled_from([1, 2, 8, 16])) * pp
    zero = draw(st.sampled_from([0, 1] if pp > 1 or dp == 1 else [0, 1, 2, 3]))
    interleaved = pp > 1 and draw(st.booleans()) and SMALL.layers % (2 * pp) == 0
    return Plan(dp=dp, tp=tp, pp=pp, zero=zero, micro_batch=mb, micro_batches=m,
                schedule="interleaved" if interleaved else draw(st.sampled_from(["1f1b", "gpipe"])),
                chunks=2 if interleaved else 1, recompute=draw(st.sampled_from(["none", "selective", "full"])),
                sequence_parallel=tp > 1 and draw(st.booleans()), dtype=draw(st.sampled_from(["bf16", "fp32"])))


@settings(max_examples=150, deadline=None)
@given(plans())
def test_every_term_is_positive_or_zero_and_the_totals_add_up(plan):
    est = estimate(SMALL, make_cluster("dgx-a100", plan.n_gpus), plan)
    assert all(v >= 0 for v in est.memory_terms().values())
    assert all(v >= 0 for v in est.time_terms().values())
    assert est.memory_total == pytest.approx(sum(est.memory_terms().values()))
    assert est.step_time == pytest.approx(sum(est.time_terms().values()))
    assert est.stage.weights > 0 and est.stage.activations.total > 0 and est.time.matmul > 0


@settings(max_examples=100, deadline=None)
@given(plans())
def test_sharding_more_never_increases_memory_per_gpu(plan):
    cluster = make_cluster("dgx-a100", plan.n_gpus)
    mem = estimate(SMALL, cluster, plan).memory_total
    # (ZeRO-2 -> 3 can hold more: for a small model DeepSpeed's prefetch bucket gathers it whole,
    # plan_memory.zero3_vs_zero2 says when)
    if plan.dp > 1 and plan.pp == 1 and plan.zero < 2:
        assert estimate(SMALL, cluster, plan.with_(zero=plan.zero + 1)).memory_total <= mem * (1 + 1e-12)
    if plan.recompute != "full":
        assert estimate(SMALL, cluster, plan.with_(recompute="full")).memory_total <= mem * (1 + 1e-12)
    states = estimate(SMALL, cluster, plan).stage
    wider = Plan(dp=plan.dp, tp=plan.tp * 2, pp=plan.pp, micro_batches=plan.m, recompute=plan.recompute)
    if plan.tp * 2 <= 16 and SMALL.heads % (plan.tp * 2) == 0:
        w = estimate(SMALL, make_cluster("dgx-a100", wider.n_gpus), wider).stage
        base = estimate(SMALL, cluster, wider.with_(tp=plan.tp)).stage
        assert w.weights + w.grads + w.optimizer < base.weights + base.grads + base.optimizer
    assert math.isfinite(states.total)


def test_default_assumptions_are_stated():
    assert "matmul_efficiency = 0.7" in DEFAULT.describe()
