"""DistributedDataParallel from scratch equals serial training and torch DDP, and sends what its
bucket plan says.

Equality is in float32 after K plain-SGD steps (by hand: building a torch.optim optimizer in a
fresh process costs seconds): parameters within ATOL = 1e-5 absolute + RTOL = 1e-4 relative of
the serial model trained on the full global batch, and of torch.nn.parallel.DistributedDataParallel
on gloo with the same seed and data. The ranks sum the gradients in another order than the serial
backward, so the runs differ by rounding only (measured: about 1e-7). One warm World per backend
runs every check on every rank and returns numbers; the tests read them.
"""

from __future__ import annotations

import os
import sys
from functools import cache

import cloudpickle
import pytest
import torch
from torch import nn

from parlab.comm import RankDied, World, launch
from parlab.parallel.data_parallel import (
    DistributedDataParallel,
    bucket_bytes,
    bucket_plan,
    cap_bytes,
)

cloudpickle.register_pickle_by_value(sys.modules[__name__])

ATOL, RTOL = 1e-5, 1e-4
K, LR = 3, 0.5           # SGD steps and learning rate (large enough to move the weights)
B = 8                    # global batch (divisible by 1, 2, 4 ranks)
CAP_MB = 0.05            # ~52 KB: TinyGPT's ~0.1 M parameters fall into 7 buckets


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.allclose(a.detach(), b.detach(), atol=ATOL, rtol=RTOL))


def _sgd(params, lr: float = LR) -> None:
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None


def _serial(steps: int, micro: int = 1):
    """TinyGPT(seed 0) trained on the global batches (``micro`` micro-batches summed per step)."""
    from parlab.parallel import batches
    from parlab.parallel.model import GPTConfig, TinyGPT

    model = TinyGPT(GPTConfig(seed=0))
    data = batches(B, 32, seed=1)
    for _ in range(steps):
        for _ in range(micro):
            x, y = next(data)
            model(x, y).backward()
        _sgd(model.parameters())
    return model


def _ddp_checks(comm) -> dict:
    """Every check of one rank on the local backend."""
    from parlab.parallel import batches
    from parlab.parallel.data_parallel import DistributedDataParallel
    from parlab.parallel.model import GPTConfig, TinyGPT

    n, out = comm.world_size, {}
    # replicas built from different seeds: the broadcast makes them rank 0's
    ddp = DistributedDataParallel(TinyGPT(GPTConfig(seed=comm.rank)), comm, bucket_cap_mb=CAP_MB)
    out["plan"], out["bucket_bytes"] = ddp.plan, ddp.bucket_bytes
    out["sizes"] = [p.numel() * p.element_size() for p in ddp.module.parameters()]
    data = batches(B, 32, seed=1, rank=comm.rank, world=n)
    out["calls"] = []
    launched_before_last = []
    first = next(ddp.module.parameters())  # the token embedding: its gradient comes last
    h = first.register_post_accumulate_grad_hook(lambda p: launched_before_last.append(ddp.launched))
    for _ in range(K):
        x, y = next(data)
        with comm.recording() as events:
            ddp(x, y).backward()
        out["calls"].append([e.nbytes for e in events if e.kind == "op" and e.op == "all_reduce"])
        _sgd(ddp.parameters())
    h.remove()
    out["launched_before_last"] = launched_before_last
    serial = _serial(K)
    out["equal_serial"] = all(_close(a, b) for a, b in zip(ddp.module.parameters(),
                                                           serial.parameters(), strict=True))
    out["max_err"] = max(float((a - b).detach().abs().max()) for a, b in zip(
        ddp.module.parameters(), serial.parameters(), strict=True))

    # no_sync: two micro-batches accumulated, one all-reduce round at the last
    acc = DistributedDataParallel(TinyGPT(GPTConfig(seed=0)), comm, bucket_cap_mb=CAP_MB)
    data = batches(B, 32, seed=1, rank=comm.rank, world=n)
    x0, y0 = next(data)
    x1, y1 = next(data)
    with comm.recording() as quiet:
        with acc.no_sync():
            acc(x0, y0).backward()
    with comm.recording() as last:
        acc(x1, y1).backward()
    out["no_sync_calls"] = len([e for e in quiet if e.kind == "op"])
    out["last_calls"] = len([e for e in last if e.op == "all_reduce" and e.kind == "op"])
    _sgd(acc.parameters())
    out["no_sync_equal"] = all(_close(a, b) for a, b in zip(acc.module.parameters(),
                                                            _serial(1, micro=2).parameters(),
                                                            strict=True))

    # no overlap: the same buckets, all sent after backward
    late = DistributedDataParallel(TinyGPT(GPTConfig(seed=0)), comm, bucket_cap_mb=CAP_MB,
                                   overlap=False)
    seen = []
    h = next(late.module.parameters()).register_post_accumulate_grad_hook(
        lambda p: seen.append(late.launched))
    late(x0, y0).backward()
    h.remove()
    out["late_launched_before_last"] = seen

    # a module that differs across ranks
    try:
        DistributedDataParallel(TinyGPT(GPTConfig(hidden=64 if comm.rank == 0 else 32)), comm)
        out["mismatch"] = None
    except ValueError as e:
        out["mismatch"] = str(e)
    out.update(_requires_grad_checks(comm))
    return out


def _requires_grad_checks(comm) -> dict:
    """requires_grad differing across ranks at construction, and changed after it."""
    out = {}
    model = nn.Linear(2, 2)
    model.bias.requires_grad_(comm.rank != 1)
    try:
        DistributedDataParallel(model, comm)
        out["frozen_on_one"] = None
    except ValueError as e:
        out["frozen_on_one"] = str(e)
    ddp = DistributedDataParallel(nn.Linear(2, 2), comm)
    ddp.module.weight.requires_grad_(False)
    try:
        ddp(torch.ones(1, 2))
        out["frozen_later"] = None
    except RuntimeError as e:
        out["frozen_later"] = str(e)
    return out


def _torch_checks(comm) -> dict:
    """parlab DDP on the torch backend against torch.nn.parallel.DistributedDataParallel (gloo,
    the default group the launch initialised) and serial training."""
    import torch.distributed as dist

    from parlab.parallel import batches
    from parlab.parallel.data_parallel import DistributedDataParallel
    from parlab.parallel.model import GPTConfig, TinyGPT

    assert dist.is_initialized()
    n = comm.world_size
    ours = DistributedDataParallel(TinyGPT(GPTConfig(seed=0)), comm, bucket_cap_mb=CAP_MB)
    theirs = torch.nn.parallel.DistributedDataParallel(TinyGPT(GPTConfig(seed=0)),
                                                       bucket_cap_mb=CAP_MB)
    for model in (ours, theirs):
        data = batches(B, 32, seed=1, rank=comm.rank, world=n)
        for _ in range(K):
            x, y = next(data)
            model(x, y).backward()
            _sgd(model.parameters())
    serial = _serial(K)
    a, b, s = (list(m.parameters()) for m in (ours.module, theirs.module, serial))
    return {**_requires_grad_checks(comm),
            "vs_torch": all(_close(p, q) for p, q in zip(a, b, strict=True)),
            "vs_serial": all(_close(p, q) for p, q in zip(a, s, strict=True)),
            "max_err_torch": max(float((p - q).detach().abs().max()) for p, q in zip(a, b, strict=True))}


@cache
def _local(n: int) -> list[dict]:
    with World(n, backend="local", timeout=120) as world:
        return world.run(_ddp_checks)


@cache
def _torch() -> list[dict]:
    with World(2, backend="torch", timeout=120) as world:
        return world.run(_torch_checks)


# ---------------------------------------------------------------------------- the bucket plan
def test_bucket_plan_reverse_order_and_cap():
    # parameters last to first; a bucket closes once it reaches the cap
    assert bucket_plan([4096, 256, 4096], cap_bytes=4300) == [[2, 1], [0]]
    assert bucket_plan([4096, 256, 4096], cap_bytes=5000) == [[2, 1, 0]]
    assert bucket_plan([10, 10, 10, 10], cap_bytes=20) == [[3, 2], [1, 0]]
    assert bucket_plan([10, 10, 10], cap_bytes=1000) == [[2, 1, 0]]
    assert bucket_plan([100, 1, 1], cap_bytes=1) == [[2], [1], [0]]
    assert bucket_bytes([4096, 256, 4096], [[2, 1], [0]]) == [4352, 4096]


def test_bucket_plan_splits_dtypes():
    assert bucket_plan([4, 4, 2, 2], 100, ["f32", "f32", "f16", "f16"]) == [[3, 2], [1, 0]]


@pytest.mark.parametrize("cap", [0, -1, -0.5])
def test_bucket_cap_must_be_positive(cap):
    with pytest.raises(ValueError, match="bucket_cap_mb must be > 0"):
        cap_bytes(cap)
    with pytest.raises(ValueError, match=r"bucket_cap_mb must be > 0.*got " + str(cap)):
        DistributedDataParallel(nn.Linear(2, 2), None, bucket_cap_mb=cap)
    with pytest.raises(ValueError, match="cap_bytes must be a positive integer"):
        bucket_plan([1], int(cap))


def test_bucket_cap_must_be_finite():
    with pytest.raises(ValueError, match="bucket_cap_mb must be finite .*got inf"):
        cap_bytes(float("inf"))
    with pytest.raises(ValueError, match="bucket_cap_mb must be finite"):  # before any communication
        DistributedDataParallel(nn.Linear(2, 2), None, bucket_cap_mb=float("inf"))


def test_bucket_cap_must_be_a_number():
    with pytest.raises(TypeError, match="bucket_cap_mb must be a number"):
        cap_bytes("25")


# ---------------------------------------------------------------------------- live, 4 ranks
def test_equals_serial_training_on_the_full_batch():
    for r in _local(4):
        assert r["equal_serial"], r["max_err"]
        assert r["max_err"] < ATOL


def test_all_reduce_calls_follow_the_bucket_plan():
    for r in _local(4):
        plan = bucket_plan(r["sizes"], cap_bytes(CAP_MB))
        assert r["plan"] == plan and len(plan) > 2
        assert r["bucket_bytes"] == bucket_bytes(r["sizes"], plan)
        assert r["calls"] == [r["bucket_bytes"]] * K  # one call per bucket, in plan order


def test_buckets_start_during_backward():
    for r in _local(4):
        # when the last gradient arrives, earlier buckets are already on the wire ...
        assert all(k >= 1 for k in r["launched_before_last"]), r["launched_before_last"]
        # ... but not with overlap=False
        assert r["late_launched_before_last"] == [0]


def test_no_sync_sends_nothing_until_the_last_micro_batch():
    for r in _local(4):
        assert r["no_sync_calls"] == 0
        assert r["last_calls"] == len(r["plan"])
        assert r["no_sync_equal"]


def test_module_differing_across_ranks_is_named():
    for r in _local(4):
        assert r["mismatch"] is not None
        assert "rank 0 has parameter wte.weight of shape (32, 64)" in r["mismatch"]
        assert "rank 1 has parameter wte.weight of shape (32, 32)" in r["mismatch"]


def _requires_grad_named(r: dict) -> None:
    assert r["frozen_on_one"] == (
        "DistributedDataParallel: parameter bias has requires_grad=True on rank 0 but "
        "requires_grad=False on rank 1; every rank must train the same parameters (freeze them "
        "on every rank, before wrapping)")
    assert r["frozen_later"].startswith("DistributedDataParallel: parameter weight has "
                                        "requires_grad=False now but True when it was wrapped")


def test_requires_grad_differing_across_ranks_is_named():
    for r in _local(4) + _torch():
        _requires_grad_named(r)


# ---------------------------------------------------------------------------- torch, gloo
def test_equals_torch_ddp_on_gloo():
    for r in _torch():
        assert r["vs_torch"], r["max_err_torch"]
        assert r["vs_serial"]


# ---------------------------------------------------------------------------- failure
def _dies_mid_backward(comm):
    from parlab.parallel import batches
    from parlab.parallel.data_parallel import DistributedDataParallel
    from parlab.parallel.model import GPTConfig, TinyGPT

    ddp = DistributedDataParallel(TinyGPT(GPTConfig()), comm, bucket_cap_mb=CAP_MB)
    if comm.rank == 1:
        next(ddp.module.parameters()).register_post_accumulate_grad_hook(lambda p: os._exit(3))
    x, y = next(batches(B, 32, rank=comm.rank, world=comm.world_size))
    ddp(x, y).backward()


def test_rank_dying_mid_step_is_reported():
    with pytest.raises(RankDied, match="rank 1") as info:
        launch(_dies_mid_backward, 2, timeout=60)
    assert info.value.rank == 1


# ---------------------------------------------------------------------------- the benchmark's faces
def test_bench_ddp_draws_the_three_figures_from_a_result():
    from parlab.bench import ddp as bench

    keys = ("overlap", "no overlap", "sync every micro-batch", "no_sync")
    fake = {n: {k: 0.01 * n for k in keys} for n in (2, 4)}
    fake[4].update({("bucket", c): 0.02 for c in bench.CAPS_MB})
    figs = bench.figures(fake)
    assert sorted(figs) == ["ddp_buckets", "ddp_no_sync", "ddp_overlap"]
    model = bench.model_curves(4)
    on, off = model["overlap"]["overlap"][1], model["overlap"]["no overlap"][1]
    assert all(a < b for a, b in zip(on, off, strict=True))  # overlap always helps


@pytest.mark.parametrize("argv, message", [(["--ranks", "1,2"], "--ranks must be between 2 and 8"),
                                           (["--batch", "6", "--micro", "4"], "divisible by --micro"),
                                           (["--bucket-mb", "0"], "--bucket-mb must be > 0")])
def test_bench_ddp_names_a_bad_flag(argv, message):
    import argparse

    from parlab.bench import ddp as bench

    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    with pytest.raises(SystemExit, match=message):
        bench.run(p.parse_args(argv))
