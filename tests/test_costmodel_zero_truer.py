"""The cost model held to the frameworks where ZeRO and memory savers are concerned (issue 11,
items 7-10): offload, the activations of LLaMA's block, gradient precision, ZeRO-3 at scale.

Each test cites the formula or the measurement it reproduces."""

import pytest

from parlab.costmodel import DEFAULT, MODELS, Plan, estimate, get_model, make_cluster
from parlab.costmodel.answers.scenarios import guide_1_19, zero3_ranking, zero3_vs_3d
from parlab.costmodel.answers.validation import (
    ZERO3_BAND,
    bloom_model,
    megatron_model,
    megatron_zero3,
    zero3_scaling,
    zero3_summary,
)
from parlab.costmodel.plan.memory import stage_memory, zero3_gathered_params
from parlab.costmodel.pricing.layer_flops import step_flops
from parlab.costmodel.pricing.memory import (
    activation_bytes,
    activation_bytes_per_layer,
    attention_score_bytes,
)
from parlab.costmodel.specs.models import ModelSpec
from parlab.data import read_csv

LLAMA = get_model("llama-7b")
PSI = LLAMA.num_params()


def _node(n):
    return make_cluster("dgx-a100", n)


# -- item 7: offload ------------------------------------------------------------------------------
def test_zero2_offload_keeps_only_the_16_bit_weights_on_the_gpu_as_deepspeeds_estimator_does():
    """ZeRO-Offload (Ren et al. 2021, Sec. 4): fp32 master weights, Adam states and the fp32
    gradients live on the host. DeepSpeed's ``estimate_zero2_model_states_mem_needs`` with
    cpu_offload=True, one node of N = 4 GPUs: gpu_mem = 2 Psi, cpu_mem = Psi x max(4 N, 16) = 16 Psi
    for the node (before its additional_buffer_factor), i.e. 16 Psi / N per GPU."""
    n = 4
    st = estimate(LLAMA, _node(n), Plan(dp=n, zero=2, offload="optimizer")).stage
    assert st.weights == pytest.approx(2 * PSI)
    assert st.grads == 0 and st.optimizer == 0 and st.step_grads == 0
    assert n * st.cpu == pytest.approx(max(4 * n, 16) * PSI)


def test_zero3_offload_matches_deepspeeds_zero3_estimator_on_the_cpu_side():
    """``estimate_zero3_model_states_mem_needs`` (one node, zero_init): offloading the optimizer,
    cpu_mem = 16 Psi and gpu_mem = 4 x largest_layer + 2 Psi / N; offloading the parameters too,
    cpu_mem = 18 Psi. Our GPU keeps the 16-bit weight shard plus what the plan's implementation
    holds gathered (DeepSpeed: the module in use and its prefetch; FSDP: two blocks)."""
    n = 8
    for impl in ("deepspeed", "fsdp"):
        opt = estimate(LLAMA, _node(n), Plan(dp=n, zero=3, offload="optimizer", zero3_impl=impl)).stage
        assert n * opt.cpu == pytest.approx(16 * PSI)
        assert opt.grads == 0 and opt.optimizer == 0
        assert opt.weights == pytest.approx(2 * PSI / n + 2 * zero3_gathered_params(LLAMA, impl=impl))
        both = estimate(LLAMA, _node(n), Plan(dp=n, zero=3, offload="optimizer+params", zero3_impl=impl)).stage
        assert n * both.cpu == pytest.approx(18 * PSI)
        assert both.weights == pytest.approx(2 * zero3_gathered_params(LLAMA, impl=impl))


def test_zero1_offload_keeps_its_unsharded_gradients_on_the_gpu():
    """With ZeRO-1 the 16-bit gradients accumulate on the GPU un-partitioned; only the update moves."""
    on_gpu = estimate(LLAMA, _node(8), Plan(dp=8, zero=1, dtype="mixed")).stage
    off = estimate(LLAMA, _node(8), Plan(dp=8, zero=1, offload="optimizer", dtype="mixed")).stage
    assert off.grads == on_gpu.grads == pytest.approx(2 * PSI)
    assert off.cpu == pytest.approx(on_gpu.optimizer + 4 * PSI / 8)


def test_zero2_offload_sends_every_micro_batchs_gradient_shard_to_the_host():
    m = 4
    one = estimate(LLAMA, _node(8), Plan(dp=8, zero=2, offload="optimizer", micro_batches=1, dtype="mixed"))
    many = estimate(LLAMA, _node(8), Plan(dp=8, zero=2, offload="optimizer", micro_batches=m, dtype="mixed"))
    shard, host = PSI / 8, _node(8).host.achievable
    assert one.time.offload == pytest.approx(shard * (2 + 2) / host)
    assert many.time.offload == pytest.approx(shard * (m * 2 + 2) / host)


# -- item 8: activations of each block ------------------------------------------------------------
def test_per_token_activation_bytes_of_each_block_by_hand():
    """Bytes one layer keeps per token (b = 1, divided by s), no parallelism, no recompute:

    GPT-3 175B (h 12288, a 96, s 2048; GeLU 4h, dropout; Korthikanti Table 2):
        34 h + 5 a s = 417,792 + 983,040 = 1,400,832
    the same block with FlashAttention (scores replaced by the fp32 log-sum-exp, 4 a):
        34 h + 4 a = 417,792 + 384 = 418,176
    LLaMA-7B (h 4096, f 11008, a 32; SwiGLU, RMSNorm, no dropout, FlashAttention):
        norms 4h + QKV and MLP inputs 4h + Q, K, V and attention output 8h = 16 h = 65,536
        + SwiGLU 6 f = 66,048 + log-sum-exp 4 a = 128: 131,712
    LLaMA-7B without FlashAttention (softmax output kept, no dropout): 16 h + 6 f + 2 a s
        = 131,584 + 131,072 = 262,656
    """
    gpt3 = get_model("gpt3-175b")
    per_token = {
        "gpt3": activation_bytes_per_layer(gpt3) / gpt3.seq_len,
        "gpt3+flash": activation_bytes_per_layer(gpt3.with_(flash_attention=True)) / gpt3.seq_len,
        "llama": activation_bytes_per_layer(LLAMA) / LLAMA.seq_len,
        "llama-no-flash": activation_bytes_per_layer(LLAMA.with_(flash_attention=False)) / LLAMA.seq_len,
    }
    assert per_token == {"gpt3": 1_400_832, "gpt3+flash": 418_176, "llama": 131_712, "llama-no-flash": 262_656}


def test_the_gpt_block_still_gives_korthikanti_table_2_with_tp_and_sp():
    m, t = get_model("gpt3-175b"), 8
    s, h, a = m.seq_len, m.hidden, m.heads
    sbh = s * h
    assert activation_bytes_per_layer(m, 1, t) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert activation_bytes_per_layer(m, 1, t, True) == pytest.approx(sbh * (34 / t + 5 * a * s / (h * t)))
    assert activation_bytes_per_layer(m, 1, t, recompute="selective") == pytest.approx(sbh * (10 + 24 / t))


def test_llama_block_splits_over_tp_like_megatron():
    """Kept whole on each TP rank: norms, QKV and MLP inputs (8 s b h, no dropout masks); split:
    Q, K, V and the attention output 8 s b h, SwiGLU 6 s b f, the log-sum-exp 4 a s b."""
    t, s, h, f, a = 4, LLAMA.seq_len, LLAMA.hidden, LLAMA.ffn, LLAMA.heads
    expect = 8 * s * h + (8 * s * h + 6 * s * f + 4 * a * s) / t
    assert activation_bytes_per_layer(LLAMA, 1, t) == pytest.approx(expect)
    assert attention_score_bytes(LLAMA, 1, t) == pytest.approx(4 * a * s / t)


def test_presets_choose_the_block_of_their_paper():
    for name, m in MODELS.items():
        if name.startswith("llama"):
            assert (m.gated_mlp, m.bias, m.dropout, m.flash_attention) == (True, False, False, True), name
        if name.startswith("gpt3"):
            assert (m.gated_mlp, m.dropout, m.flash_attention, m.ffn) == (False, True, False, 4 * m.hidden), name
    assert not get_model("bloom-176b").flash_attention  # BLOOM used fused softmax, not FlashAttention
    rows = read_csv("megatron2021_weak_scaling")
    assert megatron_model(rows[0]).dropout and not megatron_model(rows[0]).flash_attention
    assert bloom_model(8, 160).dropout and not bloom_model(8, 160).flash_attention


def test_without_dropout_the_embedding_mask_is_not_kept():
    m = ModelSpec("t", 2, 256, 4, 128, 1000)
    s, h = m.seq_len, m.hidden
    assert activation_bytes(m) - activation_bytes(m.with_(dropout=False)) == pytest.approx(
        2 * (2 * s * h + 3 * m.heads * s * s) + s * h)  # 2 layers: 2 masks + 3 a s^2 each; the embedding's


def test_flash_attentions_backward_recomputes_the_scores():
    model, hardware = step_flops(LLAMA, 1)
    no_flash = step_flops(LLAMA.with_(flash_attention=False), 1)
    assert model == no_flash[0]  # the model FLOPs (MFU) do not change
    assert hardware - no_flash[1] == pytest.approx(LLAMA.layers * 2 * LLAMA.seq_len**2 * LLAMA.hidden)


# -- item 9: gradient precision --------------------------------------------------------------------
def test_zero3_step_holds_deepspeeds_18_bytes_per_param_over_n():
    """``estimate_zero3_model_states_mem_needs`` without offload: gpu_mem = 4 x largest_layer +
    18 Psi / N, with 18 = 2 (16-bit weight shard) + 12 (fp32 master, Adam m, v) + 4 (the fp32
    gradient partition). bf16 (the default) keeps that fp32 partition as its gradients; with 16-bit
    gradients ('mixed') the 16-bit partition (2 Psi / N) is held too, since DeepSpeed frees it only
    once the fp32 copy exists (stage3.py _prepare_fp32_grad_for_sub_group)."""
    n = 8
    st = estimate(LLAMA, _node(n), Plan(dp=n, zero=3)).stage
    shard_weights = st.weights - 2 * zero3_gathered_params(LLAMA, impl="deepspeed")
    assert shard_weights + st.optimizer + st.grads == pytest.approx(18 * PSI / n) and st.step_grads == 0
    st = estimate(LLAMA, _node(n), Plan(dp=n, zero=3, dtype="mixed")).stage
    shard_weights = st.weights - 2 * zero3_gathered_params(LLAMA, impl="deepspeed")
    assert shard_weights + st.optimizer + st.step_grads == pytest.approx(18 * PSI / n)
    assert st.grads == pytest.approx(2 * PSI / n)


def test_zero2_sharded_part_matches_deepspeeds_16_over_n():
    """``estimate_zero2_model_states_mem_needs`` without offload: gpu_mem = 4 Psi + 16 Psi / N, with
    16 = 12 + 4 (the fp32 gradient partition). DeepSpeed budgets the whole 16-bit gradient (the 2 of
    its 4 Psi) that autograd produces before the reduce-scatter; ZeRO-2 holds only a bucket of it at
    a time (our runtime allowance) and its 2 Psi / N partition, as the ZeRO paper counts it."""
    n = 8
    st = estimate(LLAMA, _node(n), Plan(dp=n, zero=2, dtype="mixed")).stage
    assert st.optimizer + st.step_grads == pytest.approx(16 * PSI / n)
    deepspeed = 4 * PSI + 16 * PSI / n
    ours = st.weights + st.grads + st.optimizer + st.step_grads
    assert ours == pytest.approx(deepspeed - 2 * PSI * (1 - 1 / n))


def test_megatron_main_grad_is_18_bytes_per_param_and_needs_no_copy():
    """Megatron-LM with fp32 gradient accumulation (main_grad): 2 + 4 + 12 = 18 bytes/param
    (theoretical_memory_usage.py without the distributed optimizer); the step makes no copy."""
    st = estimate(LLAMA, _node(8), Plan(tp=8, fp32_grads=True)).stage
    assert (st.weights + st.grads + st.optimizer) / st.params == pytest.approx(18)
    assert st.step_grads == 0


def test_the_steps_fp32_copy_raises_the_peak_only_above_the_activations():
    """The copy is held after the backward pass, when the activations are freed: the peak is the
    larger of the two moments, never their sum."""
    plan = Plan(dp=8, zero=1, micro_batch=1, dtype="mixed")
    small = stage_memory(LLAMA, plan, "first", DEFAULT)
    assert small.step_grads == pytest.approx(4 * PSI / 8) and small.step_grads < small.activations.total
    assert small.step_extra == 0
    alone = stage_memory(LLAMA, Plan(zero=0, recompute="full", dtype="mixed"), "first", DEFAULT)  # 4 Psi copy
    assert alone.step_grads == pytest.approx(4 * PSI) and alone.step_grads > alone.activations.total
    assert alone.step_extra == pytest.approx(alone.step_grads - alone.activations.total)
    est = estimate(LLAMA, make_cluster("dgx-a100", 1), Plan(zero=0, recompute="full", dtype="mixed"))
    assert est.memory_terms()["gradients"] == pytest.approx(alone.grads + alone.step_extra)
    assert "fp32 copy" in est.explain()


# -- item 10: ZeRO-3 at scale -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def table2():
    return megatron_zero3()


def test_all_six_published_zero3_rows_within_15_percent(table2):
    """Narayanan et al. 2021, Table 2, ZeRO-3 without model parallelism: GPT-3 175B at batch 1536 on
    384, 768, 1536 A100s (144, 88, 44 TFLOP/s per GPU) and 530B on 640, 1120, 2240 (138, 98, 48)."""
    assert [(r.params_b, r.gpus, r.measured) for r in table2] == [
        (174.6, 384, 144), (174.6, 768, 88), (174.6, 1536, 44),
        (529.6, 640, 138), (529.6, 1120, 98), (529.6, 2240, 48)]
    summary = zero3_summary(table2)
    assert summary.band == ZERO3_BAND == 0.15 and summary.within_band, [f"{e:+.1%}" for e in summary.errors]
    assert all(r.estimate.fits for r in table2)


def test_the_384_to_1536_drop_is_within_0_1_of_the_published_x0_31(table2):
    measured, predicted = zero3_scaling(table2)
    assert measured == pytest.approx(44 / 144) and abs(predicted - measured) < 0.1


def test_the_step_stays_flat_as_gpus_double_because_the_traffic_per_gpu_does(table2):
    """From 768 to 1,536 GPUs (and 1,120 to 2,240 for 530B) the measured step time is the same:
    each GPU still moves 3 Psi elements per step (2 gathers + 1 reduce-scatter, whatever the GPU
    count) at one port's rate. The model's step changes by less than 10% there too."""
    by = {(r.params_b, r.gpus): r for r in table2}
    for small, big in (((174.6, 768), (174.6, 1536)), ((529.6, 1120), (529.6, 2240))):
        assert by[big].measured_seconds == pytest.approx(by[small].measured_seconds, rel=0.03)
        assert by[big].estimate.step_time == pytest.approx(by[small].estimate.step_time, rel=0.10)
        psi = by[big].estimate.model.num_params()
        assert by[big].traffic_bytes == pytest.approx(6 * psi * (big[1] - 1) / big[1])  # fp16: 3 x 2 B
    port = make_cluster("dgx-a100", 1536).inter.achievable
    assert by[(174.6, 1536)].estimate.time.facts["bw"]["dp"] == port == pytest.approx(22.5e9)
    assert by[(174.6, 1536)].measured_rate / port == pytest.approx(0.70, abs=0.05)


def test_the_ring_rate_of_8_ports_per_node_would_miss_the_published_rows_by_far(table2, monkeypatch):
    """What the term changes: priced at the ring's 8-port rate (as ``group_link`` gives a DP group
    with 8 ranks per node) the 1,536-GPU row would be far too fast; on a one-port node
    (``pcie-10gbe``, guide 1.19) the cap changes nothing."""
    import sys

    st_mod = sys.modules["parlab.costmodel.plan.step_time"]
    r = table2[2]
    monkeypatch.setattr(st_mod, "zero3_bandwidth", lambda cluster, ring, crosses: ring)
    ring = estimate("gpt3-175b", make_cluster("dgx-a100", 1536), r.estimate.plan)
    assert ring.hardware_tflops_per_gpu / r.measured - 1 > 0.5 > abs(r.error)
    g = guide_1_19()
    port = make_cluster("pcie-10gbe", 16).inter.achievable
    assert g.estimate.time.facts["bw"]["dp"] == pytest.approx(port)


def test_perfect_overlap_would_overshoot_the_rows_that_are_not_bound_by_traffic():
    perfect = megatron_zero3(DEFAULT.with_(zero3_overlap=1.0))
    assert perfect[0].error > ZERO3_BAND  # 384 GPUs, 4 sequences per GPU: compute hides it all


def test_the_latency_term_grows_with_the_gpu_count(table2):
    """Ring all-gather / reduce-scatter: (N - 1) alpha each, for 4 x 96 parameter groups (DeepSpeed:
    one per linear module; FSDP: one per block), 2 gathers (forward; backward, which also serves the
    recompute) and 1 reduce-scatter per micro-batch."""
    lat = [r.estimate.time.facts["zero3_latency"] for r in table2[:3]]
    assert lat[0] < lat[1] < lat[2]
    alpha = make_cluster("dgx-a100", 384).inter.latency
    assert lat[2] == pytest.approx(3 * 4 * 96 * (1536 - 1) * alpha)
    fsdp = estimate("gpt3-175b", _node(1536), table2[2].estimate.plan.with_(zero3_impl="fsdp"))
    assert fsdp.time.facts["zero3_latency"] == pytest.approx(lat[2] / 4)


def test_3d_beats_zero3_at_1024_gpus_and_more():
    for p in zero3_vs_3d("gpt3-175b", [1024, 2048], 2048):
        assert p.three_d.model_tflops_per_gpu > 1.2 * p.zero3.model_tflops_per_gpu, p.gpus


def test_assumptions_of_zero3_are_checked():
    with pytest.raises(ValueError, match="zero3_overlap"):
        DEFAULT.with_(zero3_overlap=1.5)
    with pytest.raises(ValueError, match="zero3_impl"):
        Plan(dp=8, zero=3, zero3_impl="colossal")


def test_the_advisor_ranks_tp_x_pp_x_dp_first_for_gpt3_on_1024_a100s():
    z = zero3_ranking("gpt3-175b", 1024, 1536, "dgx-a100")
    best = z.first.plan
    assert best.zero < 3 and best.tp > 1 and best.pp > 1 and best.tp <= 8  # TP inside a node
    assert z.other.step_time < z.zero3.step_time
    # perfect overlap would have tied it; priced group by group the same ZeRO-3 plan is slower
    assert z.optimistic.step_time < z.optimistic_now.step_time
    assert z.optimistic.plan.zero == 3 and z.hidden / z.traffic < z.hidden_share_to_tie
