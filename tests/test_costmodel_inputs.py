"""Inputs that never give a wrong number: every public constructor of the cost model checks types,
finiteness and ranges where a value enters, names are normalised once (every spelling gives the
same numbers), and ZeRO-3's gathered buffer is what a real ZeRO-3 holds."""

import math

import pytest

from parlab.costmodel import (
    DEFAULT,
    GPUSpec,
    LinkSpec,
    ModelSpec,
    Plan,
    custom_link,
    estimate,
    get_gpu,
    get_link,
    get_model,
    gpt_like,
    make_cluster,
    search,
    stage_params,
)
from parlab.costmodel.plan.memory import zero3_gathered_params, zero3_units, zero3_vs_zero2
from parlab.costmodel.plan.spec import TRAINING_DTYPES, training_dtype
from parlab.costmodel.pricing.params import layer_params_per_gpu

BAD = (ValueError, TypeError)


# -- names are normalised where they enter (issue 7 item 1) -------------------------------------
@pytest.mark.parametrize("field, spellings", [
    ("schedule", ["gpipe", "GPipe", " GPIPE "]),
    ("recompute", ["full", "Full", "FULL"]),
    ("offload", ["none", "None"]),
    ("dtype", ["bf16", "BF16", "bf16-mixed", "mixed-bf16", "bfloat16"]),
    ("dtype", ["mixed", "Mixed", "amp"]),
    ("optimizer", ["adam", "Adam"]),
])
def test_every_spelling_of_a_name_is_the_same_plan(field, spellings):
    base = dict(dp=1, pp=8, micro_batches=64)
    plans = [Plan(**base, **{field: s}) for s in spellings]
    expected = "bf16" if field == "dtype" else spellings[0].strip().lower()
    assert len(set(plans)) == 1 and getattr(plans[0], field) == expected


def test_gpipe_in_any_case_holds_every_micro_batch():
    # regression: 'GPipe' was kept as typed and priced as 1F1B (15 micro-batches in flight, not 64)
    model, cluster = get_model("gpt3-175b"), make_cluster("dgx-a100", 8)
    lower = estimate(model, cluster, Plan(pp=8, global_batch=64, schedule="gpipe"))
    mixed = estimate(model, cluster, Plan(pp=8, global_batch=64, schedule="GPipe"))
    assert mixed.stage.activations.in_flight == lower.stage.activations.in_flight == 64
    assert mixed.memory_total == lower.memory_total and mixed.step_time == lower.step_time


def test_recompute_in_any_case_prices_the_recompute():
    model, cluster = get_model("llama-7b"), make_cluster("dgx-a100", 8)
    assert (estimate(model, cluster, Plan(dp=8, recompute="Full")).step_time
            == estimate(model, cluster, Plan(dp=8, recompute="full")).step_time)


def test_the_precision_vocabulary_is_one_table():
    # bf16 keeps fp32 gradients as Megatron-LM and DeepSpeed do; 'mixed' is the ZeRO paper's 16-bit ones
    assert training_dtype("BF16") == training_dtype("mixed-fp32-grad") == ("mixed-fp32-grad", "bf16", True)
    assert training_dtype("mixed") == training_dtype("amp") == ("mixed", "bf16", False)
    assert Plan(dtype="mixed-fp32-grad") == Plan(dtype="bf16") == Plan(dtype="bf16", fp32_grads=True)
    assert Plan(dtype="mixed") == Plan(dtype="bf16", fp32_grads=False) and not Plan(dtype="fp16").fp32_grads
    with pytest.raises(ValueError, match="means fp32 gradients"):
        Plan(dtype="mixed-fp32-grad", fp32_grads=False)
    assert Plan(dtype="fp16-mixed").dtype == "fp16" and Plan(dtype="float32").dtype == "fp32"
    with pytest.raises(ValueError, match="keeps no fp32 master weights"):
        Plan(dtype="pure-bf16")
    with pytest.raises(ValueError, match="unknown dtype 'int8'"):
        Plan(dtype="int8")
    assert Plan(dtype="fp8").precision == "mixed-fp32-grad"  # bf16's states; its GEMMs in FP8 (issue 30)
    assert {v[1] for v in TRAINING_DTYPES.values()} == {"bf16", "fp16", "fp32", "fp8", None}


def test_presets_are_found_in_any_case():
    assert get_model("LLaMA-7B") is get_model("llama-7b")
    assert get_gpu("A100") is get_gpu("a100-80gb") and get_link("NVLink") is get_link("nvlink3-a100")
    assert make_cluster("DGX-A100", 8) == make_cluster("dgx-a100", 8)


# -- zero is rejected like any other non-positive value (issue 7 item 2) -----------------------
@pytest.mark.parametrize("field", ["dp", "tp", "pp", "micro_batch", "chunks", "global_batch", "micro_batches"])
@pytest.mark.parametrize("value", [0, -1])
def test_plan_rejects_zero_and_negative_counts(field, value):
    with pytest.raises(ValueError, match=f"{field} must be a positive integer, got {value}"):
        Plan(**{field: value})


@pytest.mark.parametrize("field", ["gpus_per_node", "nics_per_node"])
def test_make_cluster_rejects_zero_instead_of_taking_the_preset(field):
    with pytest.raises(ValueError, match=f"{field} must be a positive integer, got 0"):
        make_cluster("dgx-a100", 8, **{field: 0})


def test_make_cluster_rejects_zero_gpus():
    with pytest.raises(ValueError, match="n_gpus must be a positive integer, got 0"):
        make_cluster("dgx-a100", 0)


# -- every constructor checks types, finiteness and ranges (issue 8 item 11) --------------------
@pytest.mark.parametrize("kwargs, message", [
    (dict(sequence_parallel="False", tp=2), "sequence_parallel must be True or False, got 'False'"),
    (dict(fp32_grads="yes"), "fp32_grads must be True or False"),
    (dict(dp=2.0), "dp must be a positive integer, got 2.0"),
    (dict(dp=True), "dp must be a positive integer, got True"),
    (dict(dp="2"), "dp must be a positive integer, got '2'"),
    (dict(zero=1.0), "ZeRO stage must be an integer >= 0, got 1.0"),
    (dict(zero=True), "ZeRO stage must be an integer >= 0, got True"),
    (dict(global_batch="16"), "global_batch must be a positive integer, got '16'"),
    (dict(schedule=None), "schedule must be a name"),
    (dict(optimizer="none"), "unknown optimizer 'none'"),
])
def test_plan_rejects_wrong_types_by_field(kwargs, message):
    with pytest.raises(BAD, match=message):
        Plan(**kwargs)


def test_the_string_false_never_turns_sequence_parallelism_on():
    with pytest.raises(TypeError):
        Plan(tp=2, sequence_parallel="False")
    assert Plan(tp=2, sequence_parallel=False).sequence_parallel is False


SHAPE = dict(name="m", layers=2, hidden=64, heads=4, seq_len=16, vocab=100)


@pytest.mark.parametrize("change, message", [
    (dict(ffn_hidden=2.5), "ffn_hidden .* must be an integer >= 0, got 2.5"),
    (dict(ffn_hidden=-1), "ffn_hidden .* must be an integer >= 0, got -1"),
    (dict(layers=1.5), "layers must be a positive integer, got 1.5"),
    (dict(hidden="64"), "hidden must be a positive integer, got '64'"),
    (dict(bias="False"), "bias must be True or False"),
    (dict(name=7), "name must be a string"),
])
def test_modelspec_rejects_wrong_fields(change, message):
    with pytest.raises(BAD, match=message):
        ModelSpec(**(SHAPE | change))


@pytest.mark.parametrize("value", [math.inf, math.nan, -1.0, 0, "1e15"])
def test_gpt_like_rejects_what_is_not_a_finite_positive_size(value):
    with pytest.raises(BAD, match="n_params"):
        gpt_like(value)


def test_get_model_rejects_a_non_name():
    with pytest.raises(TypeError, match="model must be a preset name"):
        get_model(7e9)


A100 = get_gpu("a100")
GPU = dict(name="g", memory_bytes=80e9, half_flops=312e12, fp32_flops=19.5e12, hbm_bytes_per_s=2e12)


@pytest.mark.parametrize("field, value", [("memory_bytes", 0), ("half_flops", math.inf), ("fp32_flops", math.nan),
                                          ("hbm_bytes_per_s", "2e12"), ("bf16", "False")])
def test_gpu_spec_checks_its_fields(field, value):
    with pytest.raises(BAD, match=field):
        GPUSpec(**(GPU | {field: value}))


@pytest.mark.parametrize("field, value", [("bandwidth", "25e9"), ("latency", math.inf), ("latency", 0),
                                          ("bandwidth", math.nan), ("efficiency", 0), ("efficiency", "0.9")])
def test_link_spec_checks_its_fields(field, value):
    kwargs = dict(name="l", bandwidth=25e9, latency=5e-6, efficiency=0.9) | {field: value}
    with pytest.raises(BAD, match=field):
        LinkSpec(**kwargs)


def test_custom_link_checks_its_numbers():
    with pytest.raises(BAD, match="Gb/s"):
        custom_link(math.inf)
    with pytest.raises(BAD, match="latency_us"):
        custom_link(64, latency_us=0)
    assert custom_link(20.1).headline == "20.1 Gb/s = 2.51 GB/s per direction"


@pytest.mark.parametrize("field, value", [
    ("matmul_efficiency", math.nan), ("matmul_efficiency", 0), ("hbm_efficiency", "0.8"),
    ("tp_overlap", 1.5), ("pp_overlap", math.nan), ("fragmentation", -0.1), ("dp_overlap", "False"),
    ("elementwise_traffic", math.inf), ("runtime_bytes", -1.0), ("optimizer_traffic", math.nan),
    ("cpu_adam_params_per_s", 0), ("cpu_adam_params_per_s", "1e9"),
])
def test_assumptions_reject_nan_zero_and_strings_by_name(field, value):
    with pytest.raises(BAD, match=field):
        DEFAULT.with_(**{field: value})


def test_cluster_fields_must_be_specs():
    with pytest.raises(TypeError, match="Cluster.gpu must be a GPUSpec"):
        make_cluster("dgx-a100", 8).__class__(gpu="a100", n_gpus=8)
    with pytest.raises(TypeError, match="Cluster.inter must be a LinkSpec"):
        make_cluster("dgx-a100", 8).__class__(gpu=A100, n_gpus=8, inter="ib-hdr")


def test_estimate_rejects_a_cluster_given_as_a_name_with_the_way_to_build_one():
    with pytest.raises(TypeError, match=r"make_cluster\('dgx-a100', n_gpus\)"):
        estimate("gpt3-175b", "dgx-a100", Plan(dp=8))
    with pytest.raises(TypeError, match="plan must be a Plan"):
        estimate("gpt3-175b", make_cluster("dgx-a100", 8), {"dp": 8})
    with pytest.raises(TypeError, match="assumptions must be a Assumptions"):
        estimate("gpt3-175b", make_cluster("dgx-a100", 8), Plan(dp=8), assumptions={})


@pytest.mark.parametrize("kwargs, message", [
    (dict(global_batch="16"), "global_batch must be a positive integer, got '16'"),
    (dict(global_batch=0), "global_batch must be a positive integer, got 0"),
    (dict(top=-1), "top must be a positive integer, got -1"),
    (dict(top=0), "top must be a positive integer, got 0"),
    (dict(micro_batches=(0,)), "micro_batches must be a positive integer, got 0"),
    (dict(micro_batches=()), "micro_batches must name at least one choice"),
    (dict(micro_batches=4), "micro_batches must be a list of choices"),
    (dict(zero_stages=(4,)), "zero_stages must be a ZeRO stage 0, 1, 2 or 3, got 4"),
    (dict(recompute=("some",)), "unknown recompute 'some'"),
    (dict(sequence_parallel=("False",)), "sequence_parallel must be True or False"),
    (dict(dtype="pure-fp16"), "keeps no fp32 master weights"),
    (dict(colour="red"), "unknown search choice 'colour'"),
])
def test_search_checks_its_arguments(kwargs, message):
    args = dict(global_batch=16) | kwargs
    with pytest.raises(BAD, match=message):
        search("llama-7b", make_cluster("dgx-a100", 8), **args)
    if "colour" not in kwargs:
        with pytest.raises(TypeError, match="cluster must be a Cluster"):
            search("llama-7b", "dgx-a100", 16)


def test_search_normalises_its_choices():
    c = make_cluster("dgx-a100", 8)
    a = search("llama-7b", c, 16, recompute=("Full",), schedules=("GPipe", "1F1B"), micro_batches=(1,))
    b = search("llama-7b", c, 16, recompute=("full",), schedules=("gpipe", "1f1b"), micro_batches=(1,))
    assert [e.plan for e in a.ranked] == [e.plan for e in b.ranked] and a.tried == b.tried


def test_search_says_why_no_plan_is_valid_when_the_batch_is_too_small():
    res = search("gpt3-175b", make_cluster("dgx-a100", 10_000_000), 512)
    with pytest.raises(ValueError, match="global batch 512 does not split over 10,000,000 GPUs") as err:
        res.best()
    assert "add GPUs" not in str(err.value)
    assert res.tried == res.valid == 0 and res.counts() == "no plan to try"


def test_search_counts_say_it_once_when_every_plan_tried_is_valid():
    res = search("llama-7b", make_cluster("dgx-a100", 8), 8, micro_batches=(1,), recompute=("full",))
    assert res.tried == res.valid and res.counts() == f"{res.tried} plans tried, all valid; {res.fitting} fit in memory"
    none = search("llama-7b", make_cluster("dgx-a100", 8, gpu="v100"), 8, micro_batches=(1,))  # no bf16 on V100
    assert none.valid == 0 and "no valid plan: v100-32gb has no bf16" in none.reason
    assert f"{none.tried} plans tried, 0 valid" in none.counts()


# -- ZeRO-3's gathered buffer (issue 8 item 12) ------------------------------------------------
def _tiny(layers: int, vocab: int = 1000) -> ModelSpec:
    return ModelSpec(f"tiny-{layers}l", layers, 64, 4, 32, vocab)


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_zero3_never_gathers_more_than_the_model_holds(layers):
    m = _tiny(layers)
    gathered = zero3_gathered_params(m)
    assert gathered <= m.num_params()
    est = estimate(m, make_cluster("dgx-a100", 2), Plan(dp=2, zero=3, zero3_impl="fsdp"))
    shard = m.num_params() * 2 / 2
    assert est.stage.weights == pytest.approx(shard + gathered * 2)
    assert est.stage.weights - shard <= m.num_params() * 2  # the gathered part: at most the 16-bit model


def test_with_one_layer_zero3_gathers_the_embedding_and_the_layer_not_two_layers():
    m = _tiny(1)
    emb, layer, out = zero3_units(m)
    assert zero3_gathered_params(m) == pytest.approx(emb + layer)
    assert zero3_gathered_params(m) < 2 * layer + emb  # the old "2 gathered layers" on top
    assert "2 gathered layers" not in estimate(m, make_cluster("dgx-a100", 2), Plan(dp=2, zero=3)).explain()


def test_a_deep_model_gathers_two_blocks():
    gpt3 = get_model("gpt3-175b")
    assert zero3_gathered_params(gpt3, 8) == pytest.approx(2 * layer_params_per_gpu(gpt3, 8))
    llama = get_model("llama-7b")  # untied: the units are the model, each parameter once
    assert sum(zero3_units(llama)) == pytest.approx(stage_params(llama, 1, 1, "first"))
    # tied: the output end gathers the embedding matrix again for the logits
    assert sum(zero3_units(gpt3)) == pytest.approx(stage_params(gpt3, 1, 1, "first") + gpt3.vocab * gpt3.hidden)


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_zero3_peak_above_zero2_is_explained_for_tiny_models(layers):
    m = _tiny(layers)
    cmp = zero3_vs_zero2(m, 2)
    c = make_cluster("dgx-a100", 2)
    z2, z3 = (estimate(m, c, Plan(dp=2, zero=z, zero3_impl="fsdp")).stage for z in (2, 3))
    assert z3.weights - z2.weights == pytest.approx(cmp.excess)
    assert (z3.grads, z3.optimizer) == pytest.approx((z2.grads, z2.optimizer))
    assert cmp.excess > 0 and "above ZeRO-2's" in cmp.note()
    if cmp.break_even_dp:  # from that many ranks on, ZeRO-3 holds no more than ZeRO-2
        assert zero3_vs_zero2(m, cmp.break_even_dp).excess <= 0 < zero3_vs_zero2(m, cmp.break_even_dp - 1).excess


def test_zero3_holds_less_than_zero2_for_a_deep_model():
    cmp = zero3_vs_zero2(get_model("gpt3-175b"), 8)
    assert cmp.excess < 0 and "less" in cmp.note()


def test_gpt_like_refuses_a_size_no_gpt_shape_has_instead_of_returning_another_size():
    with pytest.raises(ValueError, match="too small for a GPT-style shape"):
        gpt_like(1e3)  # was a 48M-parameter model named gpt-1k
    m = gpt_like(1e9)
    assert m.num_params() == pytest.approx(1e9, rel=0.05)


def test_helpers_reject_a_bool_given_as_a_string_and_zero_rates():
    from parlab.costmodel import activation_bytes_per_layer, megatron_flops_per_iteration
    from parlab.costmodel.answers.scenarios import comm_time_vs_bandwidth, zero3_traffic_per_step

    m = get_model("gpt3-175b")
    with pytest.raises(TypeError, match="recompute must be True or False"):
        megatron_flops_per_iteration(m, 8, recompute="False")
    with pytest.raises(TypeError, match="sequence_parallel must be True or False"):
        activation_bytes_per_layer(m, 1, 8, sequence_parallel="False")
    assert activation_bytes_per_layer(m, 1, 8, recompute="Full") == activation_bytes_per_layer(m, 1, 8, recompute="full")
    with pytest.raises(ValueError, match="gbits must be a positive number, got 0"):
        comm_time_vs_bandwidth(1e9, 4, [10, 0])
    with pytest.raises(ValueError, match="dp must be a positive integer, got 0"):
        zero3_traffic_per_step(65e9, 0)


@pytest.mark.parametrize("args, error, message", [
    (("4", 1e6, 1e-6, 1e9), TypeError, r"ranks must be a positive integer, got '4'"),
    ((4.0, 1e6, 1e-6, 1e9), ValueError, r"ranks must be a positive integer, got 4.0"),
    ((4, math.nan, 1e-6, 1e9), ValueError, r"nbytes must be a number >= 0, got nan"),
    ((4, 1e6, "5us", 1e9), TypeError, r"alpha must be a number >= 0, got '5us'"),
    ((4, 1e6, 1e-6, math.nan), ValueError, r"bandwidth must be a finite number, got nan"),
])
def test_alphabeta_time_checks_its_numbers_by_name(args, error, message):
    from parlab.costmodel import alphabeta

    with pytest.raises(error, match=message):  # never a NaN time or a comparison's traceback
        alphabeta.time("all_reduce", "ring", *args)


@pytest.mark.parametrize("nbytes, bandwidth, message", [
    (1e6, 0.0, r"bandwidth must be a positive number of bytes/s, got 0.0"),
    (math.nan, 1e9, r"nbytes must be a number >= 0, got nan"),
])
def test_ring_time_names_a_bad_number_instead_of_dividing_by_zero(nbytes, bandwidth, message):
    from parlab.costmodel.pricing.collectives import ring_time

    with pytest.raises(ValueError, match=message):  # was ZeroDivisionError, and a NaN time
        ring_time("all_reduce", nbytes, 4, bandwidth, 1e-6)
