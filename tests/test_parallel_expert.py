"""Expert parallelism (parlab.parallel.expert_parallel) equals the serial MoE, and moves what the
cost model says.

The serial reference is MoEGPT with groups = ep (GShard's routing groups: one per EP rank, each
with its own capacity). One launch of 4 ranks per backend runs ep = 2 (two groups of 2) and
ep = 4 and returns numbers. Equality in float32 with atol 1e-5: the same tokens go to the same
experts and slots (compared exactly), the experts' batched matmuls see the same rows, so outputs,
losses and gradients differ by rounding only. Bytes are counted on the local backend; the torch
backend's are nominal (the same formula), so both must equal the cost model's.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import replace
from functools import cache

import cloudpickle
import pytest
import torch

from parlab.comm import launch
from parlab.costmodel.pricing.expert_parallel import all_to_all_bytes_per_layer
from parlab.costmodel.specs.moe import MoESpec, expert_capacity

pytestmark = pytest.mark.usefixtures("warm_launches")
cloudpickle.register_pickle_by_value(sys.modules[__name__])

ATOL = 1e-5
B, S = 8, 8
SPECS = {  # capacity-bound with drops and a shared expert; dropless fine-grained after a dense layer
    "top2-c1-shared": MoESpec(4, 2, 32, shared_experts=1, capacity_factor=1.0, gated=False, bias=True),
    "fine-dropless": MoESpec(4, 1, 16, capacity_factor=0.0, gated=False, bias=True,
                             dense_layers=1).fine_grained(2),  # 8 experts of 8, top-2
}


def _config():
    from parlab.parallel import GPTConfig

    return GPTConfig(seq_len=S, n_layer=2, n_head=2, hidden=16, seed=3)


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    cfg = _config()
    return (torch.randint(0, cfg.vocab_size, (B, S), generator=g),
            torch.randint(0, cfg.vocab_size, (B, S), generator=g))


def _check(comm, spec: MoESpec) -> dict:
    from parlab.parallel import train_reference
    from parlab.parallel.expert_parallel import (
        MoEGPT,
        expert_parallel,
        expert_parallel_step,
        train_expert_parallel,
    )

    cfg, (x, y), ep = _config(), _batch(), comm.world_size
    serial = MoEGPT(cfg, spec, groups=ep)
    logits = serial(x)
    loss = serial(x, y)
    loss.backward()
    grads = {k: p.grad for k, p in serial.named_parameters()}
    routes = [m.routings[comm.rank] for m in serial.moe_layers()]
    n = B // ep
    lo = comm.rank * n
    model = expert_parallel(MoEGPT(cfg, spec), comm)
    with torch.no_grad():
        out = model(x[lo:lo + n])
    run = expert_parallel_step(comm, cfg, spec, x, y, keep_grads=True)
    mean_loss = float(comm.all_reduce(torch.tensor([run.loss])) / ep)
    local = spec.num_experts // ep
    errs = {}
    for name, g in run.grads.items():
        want = grads[name][run.first_expert:run.first_expert + local] if ".experts." in name else grads[name]
        errs[name] = float((g - want).abs().max())
    trained, ref = [0.0, 1.0], [0.0, 1.0]  # two AdamW steps for the first spec on 4 ranks (time)
    if spec == next(iter(SPECS.values())) and ep == 4:
        batches = [_batch(1), _batch(2)]
        ref = train_reference(MoEGPT(cfg, spec, groups=ep), iter(batches), 2)
        trained = train_expert_parallel(comm, cfg, spec, iter(batches), 2)
    return {
        "logits": float((out - logits[lo:lo + n].detach()).abs().max()),
        "loss": abs(mean_loss - float(loss)), "grads": errs, "n_params": len(grads),
        "same_routes": all(torch.equal(e, r.expert) and torch.equal(k, r.kept)
                           for (e, k), r in zip(run.routes, routes, strict=True)),
        "dropped": [st.dropped[0] for st in run.stats],
        "bytes": run.all_to_all_bytes, "recv": run.all_to_all_recv, "calls": run.all_to_all_calls,
        "trained": max(abs(a - b) for a, b in zip(ref, trained, strict=True)),
        "moved": abs(trained[-1] - trained[0]),
    }


def _all(comm) -> dict:
    halves = [comm.new_group([0, 1]), comm.new_group([2, 3])]  # every rank makes both, in order
    two = halves[comm.rank // 2]
    return {(ep, name): _check(c, spec) for name, spec in SPECS.items() for ep, c in ((2, two), (4, comm))}


@cache
def _results(backend: str) -> list[dict]:
    return launch(_all, 4, backend=backend, timeout=180)


CASES = [(b, ep, name) for b in ("local", "torch") for ep in (2, 4) for name in SPECS]


@pytest.mark.parametrize("backend, ep, name", CASES)
def test_expert_parallel_equals_the_serial_moe(backend, ep, name):
    for rank, res in enumerate(_results(backend)):
        got = res[(ep, name)]
        where = (backend, ep, name, rank)
        assert got["same_routes"], where  # the same tokens to the same experts and slots
        assert got["logits"] < ATOL and got["loss"] < ATOL, (where, got)
        assert len(got["grads"]) == got["n_params"], where
        assert max(got["grads"].values()) < ATOL, (where, got["grads"])
        assert got["trained"] < ATOL and got["moved"] > 1e-3, where


@pytest.mark.parametrize("backend, ep, name", CASES)
def test_all_to_all_bytes_equal_the_cost_model(backend, ep, name):
    spec = SPECS[name]
    layers = _config().n_layer - spec.dense_layers
    want = layers * all_to_all_bytes_per_layer(B // ep * S, _config().hidden, spec, ep, 4, fixed_shape=True)
    for res in _results(backend):
        got = res[(ep, name)]
        assert got["bytes"] == got["recv"] == want and got["calls"] == 4 * layers
    drops = [res[(ep, name)]["dropped"] for res in _results(backend)]
    assert (min(map(min, drops)) > 0) == (name == "top2-c1-shared")  # c = 1 drops, dropless never


# ---------------------------------------------------------------------------- serial pieces
def test_routing_is_gshards_first_choices_first_in_token_order():
    from parlab.parallel.expert_parallel import route

    spec = MoESpec(3, 2, 8, capacity_factor=0.75, gated=False, bias=True)
    logits = torch.randn(10, 3, generator=torch.Generator().manual_seed(0))
    r = route(logits, spec)
    assert r.capacity == expert_capacity(10, spec) == math.ceil(0.75 * 10 * 2 / 3)
    probs = logits.softmax(-1)
    count = [0, 0, 0]
    for j in range(2):  # every first choice, then every second choice, each in token order
        for t in range(10):
            e = int(probs[t].argsort(descending=True)[j])
            assert int(r.expert[t, j]) == e and int(r.slot[t, j]) == count[e]
            count[e] += 1
    top = probs.topk(2, -1).values
    assert torch.allclose(r.gate, top / top.sum(-1, keepdim=True))
    assert r.dropped() == sum(max(c - r.capacity, 0) for c in count) == int((~r.kept).sum())


def test_aux_loss_is_switch_eq_4_and_its_gradient_reaches_the_router():
    from parlab.parallel.expert_parallel import MoE, load_balancing_loss

    probs = torch.full((6, 3), 1 / 3)
    assert float(load_balancing_loss(probs, torch.tensor([[0], [1], [2], [0], [1], [2]]))) == pytest.approx(1)
    skew = torch.tensor([[0.8, 0.1, 0.1]] * 4)
    assert float(load_balancing_loss(skew, torch.zeros(4, 1, dtype=torch.long))) == pytest.approx(3 * 0.8)
    spec = MoESpec(4, 2, 8, capacity_factor=2.0, gated=False, bias=True)
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1))
    grads = []
    for coef in (0.0, 0.5):
        torch.manual_seed(0)
        moe = MoE(spec, 8, groups=2, aux_loss_coef=coef)
        moe.init_(0.02, 0.02, torch.Generator().manual_seed(2))
        moe(x).sum().backward()
        grads.append(moe.router.weight.grad.clone())
    moe(x)
    (want,) = torch.autograd.grad(torch.stack([r.aux for r in moe.routings]).mean(), moe.router.weight)
    assert torch.allclose(grads[1] - grads[0], 0.5 * want, atol=1e-7)


def test_one_expert_is_torchs_mlp():
    """E = 1, k = 1, dropless: the gate is 1 and every token reaches the expert: nn.Linear,
    GELU, nn.Linear."""
    from parlab.parallel.expert_parallel import MoE

    h, f = 8, 16
    moe = MoE(MoESpec(1, 1, f, gated=False, bias=True), h)
    moe.init_(0.5, 0.5, torch.Generator().manual_seed(0))
    with torch.no_grad():
        moe.experts.b_in.normal_()
        moe.experts.b_out.normal_()
    fc, proj = torch.nn.Linear(h, f), torch.nn.Linear(f, h)
    with torch.no_grad():
        fc.weight.copy_(moe.experts.w_in[0].t())
        fc.bias.copy_(moe.experts.b_in[0])
        proj.weight.copy_(moe.experts.w_out[0].t())
        proj.bias.copy_(moe.experts.b_out[0])
    x = torch.randn(2, 3, h)
    assert torch.allclose(moe(x), proj(torch.nn.functional.gelu(fc(x))), atol=1e-6)


def test_drops_fall_with_the_capacity_factor_and_parameters_are_the_cost_models():
    from parlab.parallel import TinyGPT, count_params
    from parlab.parallel.expert_parallel import MoEGPT, drops_vs_capacity

    cfg, spec = _config(), SPECS["top2-c1-shared"]
    rows = drops_vs_capacity(cfg, spec, _batch()[0], [0.5, 1.0, 1.5, 0.0], groups=2)
    assert [r.capacity for r in rows] == [expert_capacity(B // 2 * S, replace(spec, capacity_factor=c))
                                          for c in (0.5, 1.0, 1.5, 0.0)]
    fractions = [r.drop_fraction for r in rows]
    assert fractions == sorted(fractions, reverse=True) and fractions[0] >= 0.5 - 1e-9 and fractions[-1] == 0
    assert len({r.max_violation for r in rows}) == 1 and rows[0].max_violation > 0  # same routing
    moe, dense = MoEGPT(cfg, spec), TinyGPT(cfg)
    mlp = sum(p.numel() for p in dense.blocks[0].mlp.parameters())
    assert count_params(moe) == count_params(dense) + cfg.n_layer * (spec.layer_params(cfg.hidden) - mlp)


@pytest.mark.parametrize(("make", "match"), [
    (lambda: __import__("parlab.parallel.expert_parallel", fromlist=["MoE"]).MoE(MoESpec(4, 2, 8), 8),
     "gated=False, bias=True"),
    (lambda: __import__("parlab.parallel.expert_parallel", fromlist=["MoEGPT"]).MoEGPT(
        _config(), MoESpec(4, 2, 8, gated=False, bias=True, dense_layers=2)), "leaves no MoE layer"),
])
def test_bad_input_names_the_rule(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_a_batch_or_expert_count_ep_does_not_divide_is_refused_before_any_message():
    from parlab.parallel.expert_parallel.model import check_batch

    class Comm:
        world_size, rank = 3, 0

    x, y = _batch()
    with pytest.raises(ValueError, match="ep=3 ranks must divide num_experts=4"):
        check_batch(Comm(), _config(), MoESpec(4, 1, 8, gated=False, bias=True), x, y)
    with pytest.raises(ValueError, match="split evenly over ep=3"):
        check_batch(Comm(), _config(), MoESpec(3, 1, 8, gated=False, bias=True), x, y)


# ---------------------------------------------------------------------------- doors
@pytest.mark.parametrize(("logits", "match"), [
    (torch.zeros(4), r"\(tokens T, experts E\), got shape \(4,\), float32"),
    (torch.zeros(8, 4, dtype=torch.long), r"floating-point .* got shape \(8, 4\), int64"),
])
def test_route_refuses_1d_or_integer_logits(logits, match):
    from parlab.parallel.expert_parallel import route

    with pytest.raises(ValueError, match=match):
        route(logits, MoESpec(4, 2, 8, gated=False, bias=True))


@pytest.mark.parametrize(("logits", "match"), [
    (torch.full((8, 4), float("nan")), r"must be finite: 8 of 8 tokens have a nan or inf"),
    (torch.tensor([[0.0, float("inf"), 0.0, 0.0]] + [[0.0] * 4] * 3), r"finite: 1 of 4 tokens"),
])
def test_route_refuses_non_finite_logits(logits, match):
    from parlab.parallel.expert_parallel import route

    with pytest.raises(FloatingPointError, match=match):
        route(logits, MoESpec(4, 2, 8, gated=False, bias=True))


def test_moe_refuses_hidden_states_of_another_size_or_dtype():
    from parlab.parallel.expert_parallel import MoE

    moe = MoE(MoESpec(4, 2, 8, gated=False, bias=True), 8)
    with pytest.raises(ValueError, match=r"\(batch, seq, hidden=8\), got shape \(2, 3, 16\)"):
        moe(torch.zeros(2, 3, 16))
    with pytest.raises(ValueError, match="weights are float32, its input is float64"):
        moe(torch.zeros(2, 3, 8, dtype=torch.float64))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast casts the matmuls' inputs
        assert moe(torch.zeros(2, 3, 8, dtype=torch.bfloat16)).shape == (2, 3, 8)


def _doors(comm) -> dict:
    """The refusals of expert parallelism on 4 ranks: the error each case raised on this rank."""
    import warnings

    from parlab.parallel.expert_parallel import (
        ExpertParallelMoE,
        MoE,
        expert_parallel_step,
        train_expert_parallel,
    )

    cfg, spec = _config(), SPECS["top2-c1-shared"]
    data = [_batch(1), _batch(2), _batch(3)]
    mine = [_batch(10 + comm.rank)] + data[1:]  # rank r's first batch differs

    def error(call) -> str:
        try:
            call()
        except Exception as err:  # noqa: BLE001 - the class and message are what the test reads
            return f"{type(err).__name__}: {err}"
        return "nothing"

    out = {}
    for name, kwargs in {"steps=-1": {"steps": -1}, "lr=nan": {"steps": 2, "lr": float("nan")},
                         "lr=inf": {"steps": 2, "lr": float("inf")}, "lr=-1": {"steps": 2, "lr": -1.0},
                         "lr=1e30": {"steps": 3, "lr": 1e30}}.items():
        out[name] = error(lambda kw=kwargs: train_expert_parallel(comm, cfg, spec, iter(data), **kw))
    out["2 batches, steps=3"] = error(lambda: train_expert_parallel(comm, cfg, spec, iter(data[:2]), 3))
    out["per-rank batches"] = error(lambda: train_expert_parallel(comm, cfg, spec, iter(mine), 2))
    torch.manual_seed(comm.rank)  # a serial layer drawn differently on every rank
    out["per-rank routers"] = error(lambda: ExpertParallelMoE(MoE(spec, cfg.hidden), comm))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expert_parallel_step(comm, cfg, spec, *data[0])
    out["warnings"] = [str(w.message) for w in caught]
    return out


def test_expert_parallel_refuses_bad_arguments_and_different_ranks_in_one_line():
    """F7/F8: steps, lr, too few batches and per-rank batches refused before any step, a
    diverging run stopped at its first non-finite loss, per-rank routers refused, no warning."""
    for res in launch(_doors, 4, backend="local", timeout=180):
        assert res.pop("warnings") == []  # float(loss) of a tensor that requires grad warned
        assert res["steps=-1"] == "ValueError: train_expert_parallel steps must be a positive integer, got -1"
        for lr in ("nan", "inf", "-1"):
            assert res[f"lr={lr}"].startswith("ValueError: train_expert_parallel lr must be a positive "
                                              "number, got"), res[f"lr={lr}"]
        assert re.fullmatch(r"FloatingPointError: train_expert_parallel: training diverged at step "
                            r"[23]: .*(nan|inf).*", res["lr=1e30"]), res["lr=1e30"]
        assert res["2 batches, steps=3"] == ("ValueError: train_expert_parallel: batches holds 2 (x, y) "
                                             "pairs but steps=3: one batch per step")
        assert res["per-rank batches"].startswith("CollectiveMismatch: train_expert_parallel: the ranks "
                                                  "disagree on batches (CRC-32) (rank 0 "), res
        assert "disagree on router and shared-expert weights (CRC-32)" in res["per-rank routers"]
