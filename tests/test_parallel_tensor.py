"""Megatron tensor parallelism equals the serial model, and moves what the cost model says.

One launch per (backend, tp) runs every check on each rank and returns numbers; the tests below
read them. Equality is in float32 with atol 1e-5 (plus rtol 1e-4 for the parameters after
three SGD steps): the TP model sums the same products in another order, so results differ
from the serial ones by rounding only (measured: at most about 1e-7 for gradients).

Traffic is counted on the local backend, the one that measures what it moves; the torch
backend's counts are nominal, so only its number of calls and message sizes are checked.
"""

from __future__ import annotations

import re
import sys
from functools import cache

import cloudpickle
import numpy as np
import pytest

from parlab.comm import algorithms, launch
from parlab.costmodel import DEFAULT, Plan, alphabeta, make_cluster, step_time

pytestmark = pytest.mark.usefixtures("warm_launches")  # launch runs on warm ranks (conftest)

cloudpickle.register_pickle_by_value(sys.modules[__name__])

ATOL, RTOL = 1e-5, 1e-4
LR = 0.5  # SGD steps large enough to move the weights visibly
BACKENDS = ["local", "torch"]
TPS = [1, 2, 4]
B, S = 4, 32  # micro-batch and sequence length of every check
CONFIGS = [(sp, tie) for sp in (False, True) for tie in (True, False)]


def _max_err(a, b) -> float:
    return float((a.detach() - b.detach()).abs().max())


def _model_checks(comm) -> dict:
    """Logits, loss and every gradient of TensorParallelGPT against TinyGPT, with and without
    SP, tied and untied; then three SGD steps."""
    import torch

    from parlab.parallel import batches
    from parlab.parallel.model import GPTConfig, TinyGPT
    from parlab.parallel.tensor_parallel import (
        TensorParallelGPT,
        allreduce_sequence_parallel_grads,
        shard_tensors,
    )

    out = {}
    x, y = next(batches(B, S, seed=0))
    for sp, tie in CONFIGS:
        cfg = GPTConfig(tie_embeddings=tie, seed=1)
        serial = TinyGPT(cfg)
        tp = TensorParallelGPT.from_serial(serial, comm, sequence_parallel=sp)
        logits = _max_err(tp(x), serial(x))
        ls, lt = serial(x, y), tp(x, y)
        ls.backward()
        lt.backward()
        allreduce_sequence_parallel_grads(tp, comm)
        want = shard_tensors(tp, {n: p.grad for n, p in serial.named_parameters()})
        grads = {n: _max_err(p.grad, want[n]) for n, p in tp.named_parameters()}
        out[(sp, tie)] = {"logits": logits, "loss": abs(ls.item() - lt.item()), "grads": grads,
                          "n_serial": len(list(serial.named_parameters()))}
        if tie:  # training: three SGD steps keep the TP shards equal to the serial slices
            data = batches(B, S, seed=3)
            for _ in range(3):
                xb, yb = next(data)
                for m in (serial, tp):
                    m.zero_grad()
                    m(xb, yb).backward()
                allreduce_sequence_parallel_grads(tp, comm)
                with torch.no_grad():  # plain SGD by hand: building a torch.optim optimizer
                    for m in (serial, tp):  # imports torch._dynamo, seconds per fresh process
                        for p in m.parameters():
                            p.sub_(LR * p.grad)
            want = shard_tensors(tp, dict(serial.named_parameters()))
            out[(sp, tie)]["trained"] = max(
                float(((p - want[n]).abs() - RTOL * want[n].abs()).detach().max())
                for n, p in tp.named_parameters())
            out[(sp, tie)]["moved"] = _max_err(serial.wte.weight, TinyGPT(cfg).wte.weight)
    out["init_checksum"] = float(sum(p.detach().double().sum() * (i + 1) for i, p in
                                     enumerate(TinyGPT(GPTConfig(seed=1)).parameters())))
    return out


def _layer_traffic(comm) -> dict:
    """What one transformer layer's forward and backward move, with and without SP."""
    import torch

    from parlab.parallel.model import GPTConfig
    from parlab.parallel.tensor_parallel import ParallelBlock

    cfg = GPTConfig()
    out = {}
    for sp in (False, True):
        block = ParallelBlock(cfg, comm, sequence_parallel=sp)
        s = S // comm.world_size if sp else S
        x = torch.randn(B, s, cfg.hidden, generator=torch.Generator().manual_seed(0),
                        requires_grad=True)
        comm.reset_traffic()
        with comm.recording() as fwd:
            y = block(x)
        with comm.recording() as bwd:
            y.backward(torch.ones_like(y))
        out[sp] = {"forward": [(e.op, e.nbytes) for e in fwd if e.kind == "op"],
                   "backward": [(e.op, e.nbytes) for e in bwd if e.kind == "op"],
                   "sent": {op: t.bytes_sent for op, t in comm.traffic().items()}}
    return out


def _algebra_checks(comm) -> dict:
    """tensor_parallel.algebra's column- and row-parallel Y = XA against numpy on the full matrices."""
    from parlab.parallel.tensor_parallel import (
        column_parallel_backward,
        column_parallel_forward,
        row_parallel_backward,
        row_parallel_forward,
        shard,
    )

    rng = np.random.default_rng(5)
    x, a = rng.standard_normal((6, 8)), rng.standard_normal((8, 12))
    dy = rng.standard_normal((6, 12))
    r, t = comm.rank, comm.world_size
    a_col, a_row, x_i = shard(a, r, t, 1), shard(a, r, t, 0), shard(x, r, t, 1)
    dx, da_col = column_parallel_backward(x, a_col, shard(dy, r, t, 1), comm)
    dx_i, da_row = row_parallel_backward(x_i, a_row, dy)
    return {
        "col_forward": float(np.abs(column_parallel_forward(x, a_col, comm) - x @ a).max()),
        "col_forward_local": float(np.abs(column_parallel_forward(x, a_col, comm, False)
                                          - shard(x @ a, r, t, 1)).max()),
        "col_dx": float(np.abs(dx - dy @ a.T).max()),
        "col_da": float(np.abs(da_col - shard(x.T @ dy, r, t, 1)).max()),
        "row_forward": float(np.abs(row_parallel_forward(x_i, a_row, comm) - x @ a).max()),
        "row_dx": float(np.abs(dx_i - shard(dy @ a.T, r, t, 1)).max()),
        "row_da": float(np.abs(da_row - shard(x.T @ dy, r, t, 0)).max()),
    }


def _layer_checks(comm) -> dict:
    """Each layer and region operator against its serial torch counterpart."""
    import torch

    from parlab.parallel import tensor_parallel as T
    from parlab.parallel.tensor_parallel import load_serial, shard, vocab_parallel_cross_entropy

    gen = torch.Generator().manual_seed(11)
    torch.manual_seed(0)  # the serial modules below draw from the global RNG: same on every rank
    t, r = comm.world_size, comm.rank
    out = {}
    # f: identity forward, all-reduce backward; g: all-reduce forward, identity backward
    x = torch.randn(3, 4, generator=gen).add(r).requires_grad_()
    y = T.f(x, comm)
    y.backward(torch.full_like(y, r + 1.0))
    out["f"] = (_max_err(y, x), _max_err(x.grad, torch.full_like(x, t * (t + 1) / 2)))
    x = torch.full((3, 4), r + 1.0, requires_grad=True)
    y = T.g(x, comm)
    y.backward(torch.full_like(y, 2.0))
    out["g"] = (_max_err(y, torch.full_like(y, t * (t + 1) / 2)), _max_err(x.grad, torch.full_like(x, 2.0)))
    # linear layers and the embedding, loaded from the serial module's weights
    h, n, v = 8, 12, 16
    x = torch.randn(2, 4, h, generator=gen, requires_grad=True)
    for name, layer, serial in [
        ("column", T.ColumnParallelLinear(h, n, comm, gather_output=True), torch.nn.Linear(h, n)),
        ("row", T.RowParallelLinear(n, h, comm, input_is_parallel=False), torch.nn.Linear(n, h)),
    ]:
        load_serial(layer, serial)
        xin = x if name == "column" else torch.randn(2, 4, n, generator=gen, requires_grad=True)
        dy = torch.randn(2, 4, serial.out_features, generator=gen)
        want, got = serial(xin), layer(xin)
        (dx_want,) = torch.autograd.grad(want, xin, dy, retain_graph=True)
        want.backward(dy)
        (dx_got,) = torch.autograd.grad(got, xin, dy, retain_graph=True)
        got.backward(dy)
        grads = _serial_grads(layer, serial)
        out[name] = (_max_err(got, want), _max_err(dx_got, dx_want),
                     _max_err(layer.weight.grad, grads["weight"]), _max_err(layer.bias.grad, grads["bias"]))
    emb, serial = T.VocabParallelEmbedding(v, h, comm), torch.nn.Embedding(v, h)
    load_serial(emb, serial)
    idx = torch.randint(0, v, (3, 5), generator=gen)
    dy = torch.randn(3, 5, h, generator=gen)
    emb(idx).backward(dy)
    serial(idx).backward(dy)
    out["embedding"] = (_max_err(emb(idx), serial(idx)),
                        _max_err(emb.weight.grad, _serial_grads(emb, serial)["weight"]))
    # vocabulary-parallel cross-entropy: this rank's (b, s, V/t) block of the logits
    logits = torch.randn(3, 5, v, generator=gen, requires_grad=True)
    targets = torch.randint(0, v, (3, 5), generator=gen)
    weights = torch.rand(3, 5, generator=gen)  # a non-uniform upstream gradient
    part = shard(logits.detach(), r, t, -1).requires_grad_()
    got = vocab_parallel_cross_entropy(part, targets, comm)
    want = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    (got * weights).sum().backward()
    (want * weights).sum().backward()
    out["cross_entropy"] = (_max_err(got, want), _max_err(part.grad, shard(logits.grad, r, t, -1)))
    return out


def _serial_grads(layer, serial) -> dict:
    """The serial module's gradients, sliced as the TP layer's parameters are."""
    from parlab.parallel.tensor_parallel import shard_tensors

    return shard_tensors(layer, {n: p.grad for n, p in serial.named_parameters()})


def _errors(comm) -> dict:
    """Messages of the ValueErrors a TP group of this size must raise."""
    import torch

    from parlab.parallel import tensor_parallel as T
    from parlab.parallel.model import GPTConfig, TinyGPT
    from parlab.parallel.tensor_parallel import TensorParallelGPT, load_serial

    cases = {
        "heads": lambda: TensorParallelGPT(GPTConfig(n_head=6, hidden=72), comm),
        "vocab": lambda: TensorParallelGPT(GPTConfig(vocab_size=30), comm),
        "hidden": lambda: TensorParallelGPT(GPTConfig(n_head=2, hidden=66), comm),
        "column": lambda: T.ColumnParallelLinear(8, 6, comm),
        "row": lambda: T.RowParallelLinear(6, 8, comm),
        "embedding": lambda: T.VocabParallelEmbedding(6, 8, comm),
        "seq": lambda: TensorParallelGPT(GPTConfig(), comm, sequence_parallel=True)(
            torch.zeros(1, 30, dtype=torch.int64)),
        "dropout": lambda: TensorParallelGPT(GPTConfig(dropout=0.1), comm),
        "sp_row": lambda: T.RowParallelLinear(8, 8, comm, input_is_parallel=False,
                                              sequence_parallel=True),
        "load": lambda: load_serial(TensorParallelGPT(GPTConfig(), comm),
                                    TinyGPT(GPTConfig(hidden=32))),
    }
    out = {}
    for name, make in cases.items():
        try:
            make()
            out[name] = None
        except ValueError as err:
            out[name] = f"{type(err).__name__}: {err}"
    return out


def _all_checks(world) -> dict:
    """Every check for tp = 1, 2 and 4 in one launch of 4 ranks: TP groups {r}, {0, 1} / {2, 3}
    and the world (a launch costs seconds here: each rank imports torch)."""
    groups = {}
    for t in TPS[:-1]:
        for start in range(0, world.world_size, t):
            group = world.new_group(list(range(start, start + t)))  # every rank makes every group
            groups[t] = group if group is not None else groups.get(t)
    groups[world.world_size] = world
    return {t: {"model": _model_checks(c), "traffic": _layer_traffic(c),
                "algebra": _algebra_checks(c), "layers": _layer_checks(c), "errors": _errors(c)}
            for t, c in groups.items()}


@cache
def _launch(backend: str) -> list[dict]:
    return launch(_all_checks, max(TPS), backend=backend, timeout=120)


def results(backend: str, tp: int) -> list[dict]:
    """Each rank's checks as a member of a TP group of size ``tp`` (ranks of the group first)."""
    return [rank[tp] for rank in _launch(backend)][:tp]


CASES = [(b, t) for b in BACKENDS for t in TPS]


# ---------------------------------------------------------------------------- equality
@pytest.mark.parametrize("backend, tp", CASES)
def test_tp_model_equals_serial_outputs_and_gradients(backend, tp):
    for rank, res in enumerate(results(backend, tp)):
        for (sp, tie), got in _configs(res):
            where = (backend, tp, rank, "sp" if sp else "no sp", "tied" if tie else "untied")
            assert got["logits"] < ATOL and got["loss"] < ATOL, where
            assert len(got["grads"]) == got["n_serial"] >= 15, where  # every parameter
            assert max(got["grads"].values()) < ATOL, (where, got["grads"])
            if tie:
                assert got["trained"] < ATOL and got["moved"] > 1e-3, where


def _configs(res):
    return [(k, v) for k, v in res["model"].items() if isinstance(k, tuple)]


@pytest.mark.parametrize("backend, tp", CASES)
def test_every_rank_builds_the_same_initial_model(backend, tp):
    from parlab.parallel.model import GPTConfig, TinyGPT

    here = float(sum(p.detach().double().sum() * (i + 1) for i, p in
                     enumerate(TinyGPT(GPTConfig(seed=1)).parameters())))
    assert [r["model"]["init_checksum"] for r in results(backend, tp)] == [here] * tp


@pytest.mark.parametrize("backend, tp", CASES)
def test_algebra_of_column_and_row_parallel_matmul(backend, tp):
    for res in results(backend, tp):
        errs = res["algebra"]
        assert max(errs.values()) < 1e-12, errs  # float64 numpy


@pytest.mark.parametrize("backend, tp", CASES)
def test_region_operators_and_layers_equal_their_serial_counterparts(backend, tp):
    for res in results(backend, tp):
        for name, errs in res["layers"].items():
            assert max(errs) < ATOL, (backend, tp, name, errs)


# ---------------------------------------------------------------------------- traffic
def cost_model_layer_collectives(tp: int, sp: bool) -> tuple[int, int]:
    """(collectives per layer, bytes of each) from the cost model's own step time: its TP term
    counts ``n_tp`` collectives of ``msg`` bytes per micro-batch over ``L`` layers (an all-reduce,
    or with SP an all-gather + reduce-scatter pair, Korthikanti et al. 2022, Section 4.2.2)."""
    from parlab.parallel.model import GPTConfig

    plan = Plan(tp=tp, micro_batch=B, dtype="fp32", sequence_parallel=sp)
    facts = step_time(GPTConfig().model_spec().with_(seq_len=S), make_cluster("dgx-a100", tp),
                      plan, DEFAULT).facts
    return facts["n_tp"] // facts["L"], facts["msg"]


@pytest.mark.parametrize("backend, tp", [(b, t) for b in BACKENDS for t in (2, 4)])
def test_layer_traffic_equals_the_cost_model(backend, tp):
    """No SP: 2 all-reduces of b*s*h forward and 2 backward (Shoeybi et al. 2019, Section 3).
    SP: an all-gather and a reduce-scatter in place of each (Korthikanti et al. 2022)."""
    h = 64
    for rank, res in enumerate(results(backend, tp)):
        for sp in (False, True):
            n, msg = cost_model_layer_collectives(tp, sp)
            assert msg == B * S * h * 4 and n == 4  # b*s*h float32 elements, 4 per layer
            got = res["traffic"][sp]
            if sp:  # the all-gather's input is a 1/t shard of the b*s*h message
                half = [("all_gather", msg // tp), ("reduce_scatter", msg)]
                assert sorted(got["forward"]) == sorted(half * (n // 2)), got["forward"]
                assert sorted(got["backward"]) == sorted(half * (n // 2)), got["backward"]
            else:
                assert got["forward"] == [("all_reduce", msg)] * (n // 2)
                assert got["backward"] == [("all_reduce", msg)] * (n // 2)
            if backend == "local":  # measured bytes = the alpha-beta traffic of what ran
                want: dict[str, float] = {}
                for op, nbytes in got["forward"] + got["backward"]:
                    full = nbytes * tp if op == "all_gather" else nbytes
                    algo = algorithms.default(op, nbytes, tp)
                    want[op] = want.get(op, 0) + alphabeta.traffic(op, algo, tp, full, rank)[0]
                assert got["sent"] == pytest.approx(want), (sp, got["sent"], want)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("tp", [2, 4])
def test_bad_tp_degrees_and_shapes_raise_value_errors_naming_the_rule(tp):
    errors = results("local", tp)[0]["errors"]
    rule = rf"the tensor-parallel degree tp={tp} \(the communicator's world_size\) must divide"
    expect = {
        "heads": rf"{rule} n_head=6" if tp == 4 else None,
        "vocab": rf"{rule} vocab_size=30" if tp == 4 else None,
        "hidden": rf"{rule} hidden=66" if tp == 4 else None,
        "column": rf"{rule} out_features=6" if tp == 4 else None,
        "row": rf"{rule} in_features=6" if tp == 4 else None,
        "embedding": rf"{rule} num_embeddings=6" if tp == 4 else None,
        "seq": r"the sequence length 30 must be divisible by it" if tp == 4 else None,
        "dropout": r"TensorParallelGPT needs GPTConfig.dropout=0, got 0.1",
        "sp_row": r"needs input_is_parallel=True",
        "load": r"split tp=\d ways gives .* but the TP parameter is",
    }
    assert set(errors) == set(expect)
    for name, pattern in expect.items():
        got = errors[name]
        if pattern is None:  # tp=2 divides these sizes: the model builds
            assert got is None, (name, got)
        else:
            assert got is not None and re.search(pattern, got), (name, got)


def test_a_non_communicator_is_a_type_error():
    from parlab.parallel import tensor_parallel as T

    with pytest.raises(TypeError, match="comm must be a parlab communicator"):
        T.ColumnParallelLinear(4, 4, comm=object())


def _fake_comm(world_size: int = 2, rank: int = 0):
    """A communicator stand-in for checks that raise before any communication."""
    from types import SimpleNamespace

    def refuse(*args, **kwargs):
        raise AssertionError("the check must raise before any communication")

    return SimpleNamespace(rank=rank, world_size=world_size, all_reduce=refuse, all_gather=refuse)


@pytest.mark.parametrize("stride", [0, -3, 1.5, True])
def test_column_parallel_stride_must_be_a_positive_integer(stride):
    from parlab.parallel import tensor_parallel as T

    with pytest.raises(ValueError, match=rf"stride must be an integer >= 1 .*got {stride!r}"):
        T.ColumnParallelLinear(4, 6, _fake_comm(), stride=stride)


@pytest.mark.parametrize("bad", [8, 100, -1])
def test_vocab_parallel_embedding_refuses_ids_outside_the_vocabulary_like_nn_embedding(bad):
    import torch

    from parlab.parallel import tensor_parallel as T

    idx = torch.tensor([[1, bad, 2]])
    with pytest.raises(IndexError):
        torch.nn.Embedding(8, 4)(idx)
    for rank in (0, 1):  # every rank raises, whether or not it owns the id's rows
        emb = T.VocabParallelEmbedding(8, 4, _fake_comm(2, rank))
        with pytest.raises(IndexError, match=rf"id {bad} is out of range: ids must be in \[0, 8\)"):
            emb(idx)
    with pytest.raises(TypeError, match="token ids must be an integer tensor, got torch.float32"):
        emb(idx.float())
