"""ZeRO stages 0-3 from scratch equal serial training, plain DDP and torch's own, hold the bytes the
cost model says, and move the bytes the ZeRO paper says.

Equality is after K AdamW steps (lr LR, betas 0.9/0.95, as parlab's make_optimizer) in fp32:
parameters within ATOL absolute of single-process ``train_reference`` on the full global batch and
of parlab's DistributedDataParallel + the same AdamW update (``offload.ParamAdamW``), for DP = 1, 2, 3, 4 (3 does not divide the
blocks' parameter counts: padded shards) on both backends. The ranks sum gradients in another
order than one process does (rounding, ~1e-7 relative), and Adam's normalised update m / sqrt(v)
turns that into up to ~3e-5 where a gradient is near zero (measured); ATOL = 1e-4 is 1% of one
step's lr. Stage 1 equals torch's
ZeroRedundancyOptimizer (over torch DDP) and stage 3 equals torch FSDP2 (``fully_shard`` per block
and on the root; it runs on gloo on CPU), within ATOL, on the torch backend. Mixed precision (bf16
working weights, fp32 master + Adam): stages 1-3 give the same bits, offload gives the same bits as
no offload, and all stay within BF16_ATOL of fp32 serial training (bf16 keeps 8 significant bits).

One warm 4-rank World per backend runs every check (split into dp groups 3 + 1, 2 + 2, then 4)
and returns numbers; the tests read them. The same worlds run the edge cases on a small model of
four equal blocks (``_Blocks``): each rank skipping a different block (every stage equals stage
0 within ATOL), an fp16 gradient that overflows on one rank (the step is skipped on every rank,
the loss scale halves, the master weights stay bit for bit), float32 inputs to fp16 weights
(cast, as DeepSpeed's engine casts them), a frozen parameter, a step before any backward, ranks
built with different settings, and a meta tensor handed to the communicator.
"""

from __future__ import annotations

import re
import sys

import cloudpickle
import pytest
import torch
from torch import nn

from parlab.parallel.zero import ZeroDataParallel, check_zero_args, shard_plan

cloudpickle.register_pickle_by_value(sys.modules[__name__])

ATOL, BF16_ATOL = 1e-4, 0.1
K, LR, B = 2, 1e-2, 12  # steps, AdamW learning rate, global batch (divisible by 1, 2, 3, 4)


def _err(a, b) -> float:
    return max(float((p.detach() - q.detach()).abs().max()) for p, q in zip(a, b, strict=True))


def _train(engine, comm, steps: int = K, opt=None):
    """``steps`` steps of ``engine`` (ZeRO: its own step; else ``opt``) on this rank's blocks."""
    from parlab.parallel import batches

    data = batches(B, 32, seed=1, rank=comm.rank, world=comm.world_size)
    for _ in range(steps):
        x, y = next(data)
        engine(x, y).backward()
        (opt or engine).step()
        if opt is not None:
            opt.zero_grad(set_to_none=True)
    return engine


def _zero(comm, stage, dtype="fp32", offload=None, **kwargs):
    from parlab.parallel.model import GPTConfig, TinyGPT

    model = TinyGPT(GPTConfig(seed=comm.rank))  # the broadcast makes every replica rank 0's (seed 0)
    engine = _train(ZeroDataParallel(model, comm, stage, dtype=dtype, lr=LR, offload=offload,
                                     **kwargs), comm)
    full = engine.full_parameters()
    return engine, full


def _group_checks(comm, serial, mixed: bool) -> dict:
    """Stages 0-3 on ``comm`` against ``serial`` and parlab DDP (fp32); with ``mixed``, the bf16
    and offload runs as well."""
    from parlab.parallel.data_parallel import DistributedDataParallel
    from parlab.parallel.model import GPTConfig, TinyGPT
    from parlab.parallel.zero import ParamAdamW

    ddp = DistributedDataParallel(TinyGPT(GPTConfig(seed=0)), comm)
    _train(ddp, comm, opt=ParamAdamW(ddp.parameters(), lr=LR))
    ddp_params = list(ddp.module.parameters())
    out = {"dp": comm.world_size, "ddp_vs_serial": _err(ddp_params, serial)}
    for stage in (0, 1, 2, 3):
        engine, full = _zero(comm, stage)
        out[stage] = {"vs_serial": _err(full, serial), "vs_ddp": _err(full, ddp_params),
                      "working_vs_master": _err(engine.module.parameters(), full) if stage < 3 else 0.0,
                      "buckets": engine.buckets}
    for stage in (0, 1, 2):  # a bucket per unit: the same update as one bucket for the model
        engine, full = _zero(comm, stage, bucket_cap_mb=1e-6)
        out[stage].update(unbucketed_vs_serial=_err(full, serial), unbucketed=engine.buckets)
    if mixed:
        runs = {s: _zero(comm, s, "bf16")[1] for s in (1, 2, 3)}
        off = {s: _zero(comm, s, "bf16", o) for s, o in ((2, "optimizer"), (3, "optimizer+params"))}
        out["bf16_vs_serial"] = max(_err(full, serial) for full in runs.values())
        out["bf16_stages_equal"] = [_err(runs[1], runs[s]) for s in (2, 3)]
        out["offload_equal"] = [_err(runs[s], full) for s, (_, full) in off.items()]
        out["host_traffic"] = {s: e.host_traffic for s, (e, _) in off.items()}
    return out


def _checks(comm, serial: list[torch.Tensor]) -> dict:
    local = comm.backend == "local"
    out = {"groups": []}
    # dp = 3 on ranks 0-2 beside dp = 1 on rank 3; then dp = 2 twice (mixed precision on the second)
    out["groups"].append(_group_checks(comm.split(int(comm.rank == 3)), serial, False))
    pair = comm.split(comm.rank // 2)
    out["groups"].append(_group_checks(pair, serial, local and comm.rank >= 2))
    out["groups"].append(_group_checks(comm, serial, False))
    if local:
        from parlab.parallel.zero import zero_memory_rows, zero_traffic_rows

        out["traffic"] = zero_traffic_rows(comm)
        out["memory"] = {s: zero_memory_rows(comm, s, dtype="bf16") for s in (0, 1, 2, 3)}
        out["memory_dp3"] = zero_memory_rows(comm.split(int(comm.rank == 3)), 3, batch=B)
        out["memory_offload"] = zero_memory_rows(comm, 3, dtype="bf16", offload="optimizer+params")
        out["accumulated"] = {s: _accumulated(comm, s, serial) for s in (1, 2, 3)}
    else:
        out["torch"] = _torch_checks(comm)
    return out


def _accumulated(comm, stage: int, serial) -> float | str:
    """K steps of two half micro-batches each (loss / 2 on each, so the sum is the block's mean):
    the error against serial training, or the error message (stage 1 refuses)."""
    from parlab.parallel import batches
    from parlab.parallel.model import GPTConfig, TinyGPT

    engine = ZeroDataParallel(TinyGPT(GPTConfig(seed=0)), comm, stage, lr=LR)
    data = batches(B, 32, seed=1, rank=comm.rank, world=comm.world_size)
    try:
        for _ in range(K):
            x, y = next(data)
            for half in (slice(0, 1), slice(1, None)):
                (engine(x[half], y[half]) * x[half].shape[0] / x.shape[0]).backward()
            engine.step()
    except RuntimeError as err:
        return str(err)
    return _err(engine.full_parameters(), serial)


def _torch_checks(comm) -> dict:
    """Stage 1 against torch DDP + ZeroRedundancyOptimizer, stage 3 against FSDP2, on gloo."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.optim import ZeroRedundancyOptimizer

    from parlab.parallel.model import GPTConfig, TinyGPT

    ddp = torch.nn.parallel.DistributedDataParallel(TinyGPT(GPTConfig(seed=0)))
    zro = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW, lr=LR,
                                  betas=(0.9, 0.95), weight_decay=0.0)
    _train(ddp, comm, opt=zro)
    fsdp = TinyGPT(GPTConfig(seed=0))
    for block in fsdp.blocks:
        fully_shard(block)
    fully_shard(fsdp)
    sharded = type(next(fsdp.parameters())).__name__
    _train(fsdp, comm, opt=torch.optim.AdamW(fsdp.parameters(), lr=LR, betas=(0.9, 0.95),
                                             weight_decay=0.0))
    fsdp_full = [p.full_tensor() for p in fsdp.parameters()]
    return {"zero1_vs_zro": _err(_zero(comm, 1)[1], list(ddp.module.parameters())),
            "zero3_vs_fsdp": _err(_zero(comm, 3)[1], fsdp_full), "fsdp_param_type": sharded}


class _Blocks(nn.Module):
    """Four equal residual blocks and a head; ``skip``: the block this replica leaves out."""

    def __init__(self, skip: int | None = None, frozen: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(4))
        self.head = nn.Linear(4, 1)
        self.head.bias.requires_grad_(not frozen)
        self.skip = skip

    def forward(self, x):
        for i, block in enumerate(self.blocks):
            if i != self.skip:
                x = x + torch.tanh(block(x))  # (n, 4)
        return self.head(x).pow(2).mean()


def _error(call) -> str | None:
    try:
        call()
    except (RuntimeError, TypeError, ValueError) as err:
        return f"{type(err).__name__}: {err}"
    return None


def _skipping(comm, stage: int) -> list[torch.Tensor]:
    """One step of ZeRO ``stage`` with rank r leaving block r out: the full parameters after it."""
    x = torch.arange(8.0).reshape(2, 4) / 8 + comm.rank  # (2, 4) this rank's batch
    engine = ZeroDataParallel(_Blocks(skip=comm.rank), comm, stage, lr=LR)
    engine(x).backward()
    engine.step()
    return engine.full_parameters()


def _edge_cases(comm) -> dict:
    """Every edge case of one rank (4 ranks): see the module's docstring."""
    x = torch.arange(8.0).reshape(2, 4) / 8 + comm.rank  # (2, 4) this rank's batch
    out = {"skip": {}, "fp16": {}, "fp16_float_input": {}}
    for stage in (0, 1, 2, 3):
        if stage < 3:
            out["skip"][stage] = _skipping(comm, stage)
        engine = ZeroDataParallel(_Blocks(), comm, stage, dtype="fp16", lr=LR)
        start, scale = engine.full_parameters(), engine.scaler.scale_value
        engine((x * (1e4 if comm.rank == 1 else 1.0)).half()).backward()  # rank 1 overflows
        engine.step()
        skipped = engine.full_parameters()
        engine(x.half()).backward()
        engine.step()
        after = engine.full_parameters()
        out["fp16"][stage] = {"skipped": engine.skipped_steps, "scales": (scale, engine.scaler.scale_value),
                              "kept": _err(start, skipped), "moved": _err(start, after),
                              "finite": all(bool(torch.isfinite(p).all()) for p in after)}
        # float32 inputs to fp16 working weights: cast to fp16 as DeepSpeed's engine does
        cast, half = (ZeroDataParallel(_Blocks(), comm, stage, dtype="fp16", lr=LR) for _ in range(2))
        cast(x).backward()
        half(x.half()).backward()
        cast.step()
        half.step()
        out["fp16_float_input"][stage] = _err(cast.full_parameters(), half.full_parameters())
    frozen = ZeroDataParallel(_Blocks(frozen=True), comm, 1, lr=LR)
    frozen(x).backward()
    frozen.step()
    full = frozen.full_parameters()
    out["frozen"] = (len(full), _err(full[-1:], [_Blocks().head.bias]))
    out["early_step"] = _error(ZeroDataParallel(_Blocks(), comm, 0).step)
    out["lr per rank"] = _error(lambda: ZeroDataParallel(_Blocks(), comm, 1, lr=LR * (1 + comm.rank)))
    meta = torch.empty(4, device="meta")
    out["meta"] = [_error(lambda: comm.all_reduce(meta)),
                   _error(lambda: comm.all_reduce(meta, async_op=True).wait())]
    return out


@pytest.fixture(scope="module")
def edge(world4):
    return world4.backend, world4.run(_edge_cases)


def test_ranks_skipping_different_equal_blocks_give_stage_0s_update(edge):
    _, ranks = edge
    for r in ranks:
        for stage in (1, 2):  # stage 2 reduce-scatters in one order, not as each backward goes
            assert _err(r["skip"][stage], r["skip"][0]) < ATOL, stage
    assert _err(ranks[0]["skip"][0], ranks[3]["skip"][0]) == 0.0  # the replicas agree


def test_stage_3_with_ranks_skipping_blocks_gives_stage_0s_update_or_names_the_unit(world4, edge):
    try:
        ranks = world4.run(_skipping, 3)
    except Exception as err:  # noqa: BLE001 - what the run raised, read below
        assert re.search(r"ZeRO stage 3 on rank \d, .* unit blocks\.\d \(blocks\.\d\.weight, \.\.\.\)",
                         str(err)), str(err)
        return
    for r, e in zip(ranks, edge[1], strict=True):
        assert _err(r, e["skip"][0]) < ATOL


def test_fp16_overflow_skips_the_step_on_every_rank_and_backs_off(edge):
    _, ranks = edge
    for r in ranks:
        for stage, f in r["fp16"].items():
            assert f["skipped"] == 1, stage
            assert f["scales"] == (2.0**15, 2.0**14), stage  # halved once (backoff_factor 0.5)
            assert f["kept"] == 0.0, stage                   # the overflowing step changed nothing
            assert f["finite"] and f["moved"] > 0, stage     # the next step trained


def test_fp16_takes_float32_inputs_as_it_takes_fp16_ones(edge):
    """A float-input model under dtype='fp16' raised torch's 'mat1 and mat2 must have the same
    dtype': its float inputs are cast to the working dtype (DeepSpeed's _cast_inputs_half)."""
    _, ranks = edge
    for r in ranks:
        assert r["fp16_float_input"] == {0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0}


def test_frozen_parameter_early_step_and_settings_that_differ_between_ranks(edge):
    _, ranks = edge
    for r in ranks:
        assert r["frozen"] == (10, 0.0)  # 4 x (weight, bias), the head's weight and its frozen bias
        assert "step() before backward()" in r["early_step"]
        # each rank updates its own shard: another lr on one rank was silently wrong
        assert r["lr per rank"].startswith("CollectiveMismatch: ZeroDataParallel: the ranks disagree on lr "
                                           "(rank 0 0.01, rank 1 0.02, rank 2 0.03, rank 3 0.04)")


def test_meta_tensors_are_refused_by_both_backends(edge):
    backend, ranks = edge
    for r in ranks:
        for message in r["meta"]:
            assert message is not None and message.startswith("TypeError"), (backend, message)
            assert "meta" in message


@pytest.mark.parametrize("kwargs, message", [
    ({"betas": (1.5, 0.9)}, r"AdamW betas\[0\] must be in \[0, 1\).* got 1.5"),
    ({"betas": (0.9, 1.0)}, r"AdamW betas\[1\] must be in \[0, 1\).* got 1.0"),
    ({"eps": -1e-8}, r"AdamW eps must be >= 0.* got -1e-08"),
    ({"weight_decay": -0.1}, r"AdamW weight_decay must be >= 0, got -0.1"),
    ({"lr": -1.0}, r"AdamW lr must be > 0, got -1.0"),
])
def test_adamw_refuses_what_torch_refuses(kwargs, message):
    with pytest.raises(ValueError):
        torch.optim.AdamW([nn.Parameter(torch.zeros(1))], **kwargs)
    with pytest.raises(ValueError, match=message):  # before any communication
        ZeroDataParallel(nn.Linear(2, 2), None, 1, **kwargs)


_RESULTS: dict[str, list[dict]] = {}


@pytest.fixture(scope="module")
def serial() -> list[torch.Tensor]:
    """TinyGPT(seed 0) after K steps of ``train_reference`` (torch.optim.AdamW) on the global batches."""
    from parlab.parallel import batches
    from parlab.parallel.model import GPTConfig, TinyGPT, train_reference

    model = TinyGPT(GPTConfig(seed=0))
    train_reference(model, batches(B, 32, seed=1), K, lr=LR)
    return [p.detach().clone() for p in model.parameters()]


@pytest.fixture(scope="module")
def results(world4, serial):
    if world4.backend not in _RESULTS:
        _RESULTS[world4.backend] = world4.run(_checks, serial)
    return world4.backend, _RESULTS[world4.backend]


def _only(results, backend: str, why: str) -> list[dict]:
    """The ranks' results if they come from ``backend``; else the test is skipped, saying ``why``."""
    if results[0] != backend:
        pytest.skip(why)
    return results[1]


# ---------------------------------------------------------------------------- the shard plan (pure)
def test_shard_plan_pads_an_uneven_count():
    plan = shard_plan(10, 4)
    assert (plan.shard, plan.padded, plan.padding) == (3, 12, 2)
    assert [plan.bounds(r) for r in range(4)] == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert shard_plan(2, 4).bounds(3) == (2, 2)  # a rank whose whole block is padding
    assert shard_plan(12, 4).padding == 0


@pytest.mark.parametrize("numel, world, message", [(-1, 2, "numel must be an integer >= 0"),
                                                   (4, 0, "world must be an integer >= 1"),
                                                   (4.0, 2, "numel must be an integer")])
def test_shard_plan_names_a_bad_argument(numel, world, message):
    with pytest.raises(ValueError, match=message):
        shard_plan(numel, world)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("stage, dtype, offload, message", [
    (4, "fp32", None, r"ZeRO stage must be one of 0, 1, 2, 3, got 4"),
    (-1, "fp32", None, r"ZeRO stage must be one of 0, 1, 2, 3, got -1"),
    (True, "fp32", None, r"ZeRO stage must be one of 0, 1, 2, 3, got True"),
    (1, "int8", None, r"dtype must be one of fp32, bf16, fp16 .* got 'int8'"),
    (2, "fp32", "disk", r"offload must be None, 'optimizer' or 'optimizer\+params', got 'disk'"),
    (0, "fp32", "optimizer", r"offload='optimizer' needs ZeRO stage >= 1 .* got stage=0"),
    (2, "bf16", "optimizer+params", r"offload='optimizer\+params' needs ZeRO stage 3 .* got stage=2"),
])
def test_bad_configuration_is_named(stage, dtype, offload, message):
    with pytest.raises(ValueError, match=message):
        check_zero_args(stage, dtype, offload)
    with pytest.raises(ValueError, match=message):  # the engine checks before any communication
        ZeroDataParallel(torch.nn.Linear(2, 2), None, stage, dtype=dtype, offload=offload)


def test_a_bucket_cap_that_is_not_a_positive_size_is_named_before_any_communication():
    for cap, message in ((0, "bucket_cap_mb must be > 0"), (float("inf"), "must be finite")):
        with pytest.raises(ValueError, match=message):
            ZeroDataParallel(torch.nn.Linear(2, 2), None, 1, bucket_cap_mb=cap)


# ---------------------------------------------------------------------------- equivalence
def test_every_stage_equals_serial_training_and_ddp_for_dp_1_to_4(results):
    _, ranks = results
    seen = set()
    for r in ranks:
        for g in r["groups"]:
            seen.add(g["dp"])
            assert g["ddp_vs_serial"] < ATOL
            for stage in (0, 1, 2, 3):
                assert g[stage]["vs_serial"] < ATOL, (g["dp"], stage, g[stage])
                assert g[stage]["vs_ddp"] < ATOL, (g["dp"], stage, g[stage])
                assert g[stage]["working_vs_master"] == 0.0  # fp32: the working copy is the master
    assert seen == {1, 2, 3, 4}


def test_stages_0_to_2_reduce_and_gather_a_bucket_of_units_at_a_time(results):
    """TinyGPT (0.4 MB) fits DDP's default 25 MiB bucket: one bucket, last block first and the
    root last; a cap below a unit's size gives a bucket per unit, and the same update."""
    _, ranks = results
    for r in ranks:
        for g in r["groups"]:
            for stage in (0, 1, 2):
                assert g[stage]["buckets"] == [["blocks.1", "blocks.0", ""]], g[stage]["buckets"]
                assert g[stage]["unbucketed"] == [["blocks.1"], ["blocks.0"], [""]]
                assert g[stage]["unbucketed_vs_serial"] < ATOL, (g["dp"], stage, g[stage])


def test_mixed_precision_stages_agree_and_offload_changes_nothing(results):
    ranks = _only(results, "local", "mixed precision and offload are checked once, on the local backend")
    for r in ranks[2:]:  # the second dp = 2 group
        g = r["groups"][1]
        assert g["bf16_stages_equal"] == [0.0, 0.0]  # same sums, same shards: the same bits
        assert g["offload_equal"] == [0.0, 0.0]     # the host runs the same update
        assert 0.0 < g["bf16_vs_serial"] < BF16_ATOL
        # offload moves the 16-bit gradient shard down and (stage 2) the weights back, each step
        psi_shard = 104192 // 2  # TinyGPT's parameters over 2 ranks
        assert g["host_traffic"][2] == {"device_to_host": K * 2 * psi_shard, "host_to_device": K * 2 * psi_shard}
        # stage 3 with the weights on the host: no copy back, but every gather copies the shard up
        assert g["host_traffic"][3]["device_to_host"] == K * 2 * psi_shard
        assert g["host_traffic"][3]["host_to_device"] == K * 2 * 2 * psi_shard  # forward + backward


def test_gradient_accumulation_adds_into_the_owned_shard(results):
    ranks = _only(results, "local", "checked once, on the local backend")
    for r in ranks:
        acc = r["accumulated"]
        assert acc[2] < ATOL and acc[3] < ATOL, acc
        assert "call step() after every backward" in acc[1]  # stage 1 reduces the full gradient


def test_stage1_equals_zero_redundancy_optimizer_and_stage3_equals_fsdp2(results):
    ranks = _only(results, "torch", "torch's own ZeRO runs on the torch backend (gloo)")
    for r in ranks:
        t = r["torch"]
        assert t["fsdp_param_type"] == "DTensor"  # FSDP2 really sharded the parameters
        assert t["zero1_vs_zro"] < ATOL, t
        assert t["zero3_vs_fsdp"] < ATOL, t


# ---------------------------------------------------------------------------- memory and traffic
def _rows(rows):
    return {r["term"]: (r["measured"], r["modelled"]) for r in rows}


def test_bytes_held_per_rank_match_the_cost_model(results):
    ranks = _only(results, "local", "measured once, on the local backend")
    for r in ranks:
        for stage, rows in r["memory"].items():
            terms = _rows(rows)
            for term in ("weights", "gradients", "optimizer states"):  # 4 divides Psi: exact
                assert terms[term][0] == terms[term][1], (stage, term, terms[term])
            measured, modelled = terms["peak during the step"]
            assert measured >= modelled  # the peak also holds a unit's gradient bucket (2-3)
        bf16 = 104192 * 2  # TinyGPT's Psi in bf16
        held = {s: _rows(rows) for s, rows in r["memory"].items()}
        assert held[0]["weights"][0] == held[2]["weights"][0] == bf16      # replicated
        assert held[3]["weights"][0] == bf16 // 4                          # sharded
        assert held[1]["gradients"][0] == bf16 and held[2]["gradients"][0] == bf16 // 4
        assert held[0]["optimizer states"][0] == 6 * bf16 == 4 * held[1]["optimizer states"][0]
        # stage 3 gathers at most the root unit and two blocks: the model's two blocks + the root
        gathered, model_gathered = held[3]["gathered units"]
        assert model_gathered <= gathered <= bf16
        off = _rows(r["memory_offload"])
        assert off["optimizer states"][0] == off["weights"][0] == 0
        assert off["host (offloaded)"][0] == off["host (offloaded)"][1]


def test_uneven_shards_hold_the_padded_share(results):
    ranks = _only(results, "local", "measured once, on the local backend")
    for r in ranks[:3]:  # dp = 3: 49984 block parameters do not divide by 3
        terms = _rows(r["memory_dp3"])
        for term in ("weights", "gradients", "optimizer states"):
            measured, modelled = terms[term]
            per_element = {"weights": 4, "gradients": 4, "optimizer states": 8}[term]
            assert 0 <= measured - modelled <= 3 * per_element * 2, (term, measured, modelled)


def test_traffic_stages_1_2_equal_ddp_and_stage_3_is_one_and_a_half(results):
    ranks = _only(results, "local", "the torch backend's counts are nominal; measured on the local backend")
    for r in ranks:
        by = {row["strategy"]: row for row in r["traffic"]}
        assert by["ZeRO-1"]["ratio"] == by["ZeRO-2"]["ratio"] == 1.0
        assert by["ZeRO-3"]["ratio"] == 1.5
        for row in r["traffic"]:
            assert row["bytes_sent"] == row["modelled"], row
