"""Module-level recompute in the cost model (Megatron-Core's ``recompute_modules``): each module's
stored activations saved (Korthikanti et al. 2022, Table 2 terms) and the forward FLOPs it costs;
none / selective / full priced from the same split as before; bad module names refused in one line."""

import pytest

from parlab.costmodel import Plan, check_plan, estimate, get_model, make_cluster
from parlab.costmodel.pricing.activation_terms import layer_activation_terms
from parlab.costmodel.pricing.layer_flops import step_flops
from parlab.costmodel.pricing.memory import activation_bytes_per_layer, attention_score_bytes

GPT3 = get_model("gpt3-175b")
V3 = get_model("deepseek-v3")


def saved(model, modules, t=1, sp=False, moe_layer=None):
    return (activation_bytes_per_layer(model, 1, t, sp, moe_layer=moe_layer)
            - activation_bytes_per_layer(model, 1, t, sp, "modules", modules=modules, moe_layer=moe_layer))


def test_the_terms_add_up_to_table_2():
    """GPT-3's layer without parallelism: 34 s b h + 5 a s^2 b (Korthikanti et al. 2022, Table 2)."""
    s, h, a = GPT3.seq_len, GPT3.hidden, GPT3.heads
    terms = layer_activation_terms(GPT3, 1)
    assert sum(n for _, n in terms.values()) + attention_score_bytes(GPT3) == 34 * s * h + 5 * a * s * s
    assert activation_bytes_per_layer(GPT3) == 34 * s * h + 5 * a * s * s


@pytest.mark.parametrize("t, sp", [(1, False), (8, False), (8, True)])
def test_each_dense_module_saves_its_terms(t, sp):
    s, h, f = GPT3.seq_len, GPT3.hidden, GPT3.ffn
    assert saved(GPT3, ("core_attn",), t, sp) == pytest.approx(attention_score_bytes(GPT3, 1, t))
    assert saved(GPT3, ("layernorm",), t, sp) == pytest.approx(4 * s * h / (t if sp else 1))  # the norms' outputs
    assert saved(GPT3, ("mlp",), t, sp) == pytest.approx(4 * s * f / t)  # GeLU's input and output
    assert saved(GPT3, ("core_attn", "layernorm", "mlp"), t, sp) == pytest.approx(
        saved(GPT3, ("core_attn",), t, sp) + saved(GPT3, ("layernorm",), t, sp) + saved(GPT3, ("mlp",), t, sp))
    assert activation_bytes_per_layer(GPT3, 1, t, sp, "modules", modules=("core_attn",)) == \
        activation_bytes_per_layer(GPT3, 1, t, sp, "selective")


def test_moe_modules_save_the_expert_terms():
    terms = layer_activation_terms(V3, 1)
    moe = sum(n for k, (_, n) in terms.items() if k.startswith(("expert", "shared", "router")))
    assert saved(V3, ("moe",)) == moe
    assert saved(V3, ("moe_act",)) == terms["expert activation output"][1]
    assert saved(V3, ("shared_experts",)) == terms["shared experts"][1] > 0
    assert saved(V3, ("mlp",)) == 0  # "mlp" is the dense MLP: not an MoE layer's
    assert saved(V3, ("mlp",), moe_layer=False) > 0  # but DeepSeek-V3's dense first layers have one


def test_each_module_costs_its_forward_flops():
    b, s, h, f, t = 1, GPT3.seq_len, GPT3.hidden, GPT3.ffn, 8
    cluster = make_cluster("dgx-a100", 64)
    base = Plan(tp=8, pp=8, micro_batches=16, sequence_parallel=True)
    facts = {mods: estimate(GPT3, cluster, base.with_(recompute="modules", recompute_modules=mods)).time.facts
             for mods in (("mlp",), ("layernorm",), ("core_attn",))}
    none = estimate(GPT3, cluster, base).time.facts
    L = none["L"]
    assert facts[("mlp",)]["flops_mb"] - none["flops_mb"] == pytest.approx(L * 2 * b * s * 2 * h * f / t)
    assert facts[("core_attn",)]["flops_mb"] - none["flops_mb"] == pytest.approx(L * 4 * b * s * s * h / t)
    assert facts[("layernorm",)]["flops_mb"] == none["flops_mb"]  # elementwise only
    assert facts[("layernorm",)]["traffic_mb"] > none["traffic_mb"]
    model, hardware = step_flops(GPT3, 4, "modules", ("mlp",))
    assert hardware - model == pytest.approx(GPT3.layers * 2 * 4 * s * 2 * h * f)


def test_module_recompute_sits_between_selective_and_full():
    cluster = make_cluster("dgx-a100", 64)
    plan = Plan(tp=8, pp=8, micro_batches=16, sequence_parallel=True)
    est = {r: estimate(GPT3, cluster, plan.with_(recompute=r)) for r in ("selective", "full")}
    mods = estimate(GPT3, cluster, plan.with_(recompute="modules", recompute_modules=("core_attn", "layernorm", "mlp")))
    assert est["full"].memory_total < mods.memory_total < est["selective"].memory_total
    assert est["selective"].step_time < mods.step_time < est["full"].step_time
    same = estimate(GPT3, cluster, plan.with_(recompute="modules", recompute_modules="core_attn"))
    assert same.memory_total == est["selective"].memory_total
    assert same.step_time == pytest.approx(est["selective"].step_time)
    assert "recompute=modules(core_attn,layernorm,mlp)" in mods.plan.describe()


@pytest.mark.parametrize("kwargs, rule", [
    (dict(recompute="modules", recompute_modules=("attn",)),
     "unknown recompute module 'attn'; allowed: core_attn, layernorm, mlp, moe, moe_act, shared_experts, mla_up_proj"),
    (dict(recompute="modules"), "it needs them"),
    (dict(recompute="full", recompute_modules=("mlp",)), "go with recompute='modules'"),
])
def test_plan_refuses_bad_module_lists_in_one_line(kwargs, rule):
    with pytest.raises(ValueError, match=rule.replace("(", "\\(").replace(")", "\\)")):
        Plan(**kwargs)


@pytest.mark.parametrize("model, module, rule", [
    (GPT3, "moe", "recompute module 'moe' recomputes MoE layers, and gpt3-175b is a dense model"),
    (get_model("mixtral-8x7b"), "shared_experts", "has no shared experts"),
    (GPT3, "mla_up_proj", "not modelled"),
])
def test_check_plan_refuses_modules_the_model_lacks(model, module, rule):
    with pytest.raises(ValueError, match=rule):
        check_plan(model, make_cluster("dgx-a100", 8), Plan(tp=8, recompute="modules", recompute_modules=(module,)))
