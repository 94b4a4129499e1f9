"""The cost model's memos (attack review F17's speed-ups) never hand one plan's or model's numbers
to another: two plans, or two models, that differ in a single field are priced as if each were
the only one ever priced, for every field main added after the memos were written (FP8 recipe,
the uneven split's knobs, module-level recompute, all-gather CP; GQA, head_dim, windows), and a
memoised plan function cannot read a field its key leaves out."""

from __future__ import annotations

import sys

import pytest

from parlab.costmodel import Plan, estimate, get_model, make_cluster
from parlab.costmodel.plan.memo import plan_memo
from parlab.costmodel.plan.memory.stage import _NOT_MODEL_STATES, _stage_states
from parlab.costmodel.pricing.memory import layer_activation_bytes
from parlab.costmodel.pricing.moe_layer import stage_layer_kinds, stage_param_split

LLAMA = get_model("llama-2-7b")  # 32 layers, multi-head attention, 4,096 tokens
LLAMA_31 = LLAMA.with_(layers=31)  # 31 + 1 = 32: the embedding (or the loss) counted as a layer splits over pp = 4


def clear_memos() -> None:
    """Empty every memo of the cost model (each module-level function with ``cache_clear``)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("parlab.costmodel") and module is not None:
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def priced(model, plan) -> dict:
    est = estimate(model, make_cluster("dgx-h100", plan.n_gpus), plan)
    return {**est.memory_terms(), **est.time_terms(), "step": est.step_time, "mfu": est.mfu,
            "memory": est.memory_total}


#: (id, model, plan A, plan B that differs from A in the one field named, the terms B changes)
PLAN_TWINS = [
    ("fp8_recipe", LLAMA, Plan(dp=8, zero=1, dtype="fp8", micro_batches=4, fp8_recipe="te-delayed"),
     {"fp8_recipe": "deepseek-blockwise"}, {"parameters"}),
    ("first_stage_layers", LLAMA, Plan(dp=2, pp=4, micro_batches=8), {"first_stage_layers": 5},
     {"parameters", "activations", "compute: matmuls", "pipeline bubble"}),
    ("last_stage_layers", LLAMA, Plan(dp=2, pp=4, micro_batches=8), {"last_stage_layers": 5},
     {"parameters", "activations", "compute: matmuls", "pipeline bubble"}),
    ("embedding_as_layer", LLAMA_31, Plan(dp=2, pp=4, micro_batches=8), {"embedding_as_layer": True},
     {"pipeline bubble"}),
    ("loss_as_layer", LLAMA_31, Plan(dp=2, pp=4, micro_batches=8), {"loss_as_layer": True},
     {"parameters", "activations", "compute: matmuls"}),
    ("recompute_modules", LLAMA, Plan(dp=8, recompute="modules", recompute_modules=("mlp",)),
     {"recompute_modules": ("core_attn",)}, {"activations", "compute: matmuls"}),
    ("cp_impl", LLAMA, Plan(dp=4, cp=2), {"cp_impl": "all-gather"}, {"CP communication (exposed)"}),
]


@pytest.mark.parametrize("name, model, a, change, changed", PLAN_TWINS, ids=[t[0] for t in PLAN_TWINS])
def test_a_plan_differing_in_one_field_is_priced_as_if_alone(name, model, a, change, changed):
    b = a.with_(**change)
    clear_memos()
    alone = priced(model, b)
    clear_memos()
    first = priced(model, a)  # fills every memo with A's pieces
    after = priced(model, b)
    assert after == alone  # nothing of A's was reused for B
    assert {k for k in alone if alone[k] != first[k]} >= changed  # and the field does change B's price


#: ModelSpec fields added after the memos: estimate does not price them yet (``check_priced``),
#: so the memoised functions that take a model are checked one by one
MODEL_TWINS = [("kv_heads", 8), ("head_dim", 64), ("window", 1024)]

PLAN = Plan(dp=2, pp=4, micro_batches=8, first_stage_layers=5)
LAYOUT = PLAN.layout(LLAMA)
MEMOS = {  # memo: its arguments after the model
    "stage_param_split": (stage_param_split, (2, 4, "first", 1, LAYOUT), {}),
    "stage_layer_kinds": (stage_layer_kinds, (4, "last", LAYOUT), {}),
    "layer_activation_bytes": (layer_activation_bytes, (2, 2, True, "modules"),
                               {"cp": 1, "moe_layer": None, "modules": ("mlp",)}),
    "_stage_states": (_stage_states, (PLAN, "first"), {}),
}


@pytest.mark.parametrize("field, value", MODEL_TWINS, ids=[t[0] for t in MODEL_TWINS])
@pytest.mark.parametrize("memo", list(MEMOS))
def test_every_memo_keys_the_whole_model(memo, field, value):
    fn, args, kwargs = MEMOS[memo]
    other = LLAMA.with_(**{field: value})
    clear_memos()
    fn(LLAMA, *args, **kwargs)
    misses = fn.cache_info().misses
    got = fn(other, *args, **kwargs)
    assert fn.cache_info().misses == misses + 1  # a model differing in one field is a new key
    assert got == fn.__wrapped__(other, *args, **kwargs)  # and gets its own numbers


@pytest.mark.parametrize("field, value", [("fp8_recipe", "te-current"), ("first_stage_layers", 5),
                                          ("last_stage_layers", 5), ("chunks", 2), ("offload", "optimizer")])
def test_a_stages_model_states_are_keyed_on_what_they_depend_on(field, value):
    base = Plan(dp=2, pp=4, zero=1, micro_batches=8, dtype="fp8" if field == "fp8_recipe" else "bf16")
    other = base.with_(**{field: value}, **({"schedule": "interleaved"} if field == "chunks" else {}))
    clear_memos()
    _stage_states(LLAMA, base, "first")
    misses = _stage_states.cache_info().misses
    _stage_states(LLAMA, other, "first")
    assert _stage_states.cache_info().misses == misses + 1


def test_plans_that_differ_only_in_what_model_states_ignore_share_one_entry():
    """micro-batching, schedule, recompute, SP, cp_impl: the same states, computed once."""
    base = Plan(dp=2, tp=2, pp=2, zero=1, micro_batches=8)
    twins = [base, base.with_(micro_batch=2), base.with_(schedule="gpipe"), base.with_(recompute="full"),
             base.with_(sequence_parallel=True), base.with_(recompute="modules", recompute_modules=("mlp",))]
    assert set(_NOT_MODEL_STATES) >= {"micro_batch", "schedule", "recompute", "sequence_parallel"}
    clear_memos()
    values = {_stage_states(LLAMA, p, "first") for p in twins}
    assert len(values) == 1 and _stage_states.cache_info().misses == 1


def test_a_memoised_plan_function_cannot_read_a_field_its_key_leaves_out():
    @plan_memo(maxsize=8, ignore=("micro_batches", "global_batch"))
    def reads_m(model, plan):
        return plan.m  # a property that reads micro_batches

    @plan_memo(maxsize=8, ignore=("schedule",))
    def reads_schedule(model, plan):
        return plan.schedule

    @plan_memo(maxsize=8, ignore=("schedule",))
    def reads_layout(model, plan):
        return plan.layout(model), plan.edp  # a method and a property over kept fields

    with pytest.raises(AttributeError, match=r"reads_m read Plan.micro_batches, which its memo key leaves out"):
        reads_m(LLAMA, PLAN)
    with pytest.raises(AttributeError, match=r"Plan.schedule"):
        reads_schedule(LLAMA, PLAN)
    assert reads_layout(LLAMA, PLAN) == (LAYOUT, 2)
    with pytest.raises(ValueError, match=r"plan_memo ignore names no Plan field: micro_batchez"):
        plan_memo(maxsize=8, ignore=("micro_batchez",))
