"""Checker for exercise 03 (bucketed DDP): the learner's bucket plan is PyTorch's (Li et al.
2020, Section 3.2.3: parameters in reverse order, a bucket closed once it reaches the cap), and
the learner's gradient hooks train replicas that stay equal to serial training on the full
batch, with exactly one all-reduce per bucket per step.

The learner writes ``make_buckets(sizes, cap_bytes)`` (pure, compared with
``parlab.parallel.data_parallel.bucket_plan`` on random cases) and ``attach_hooks(params, comm, plan)``
that registers the gradient hooks and returns ``finish()``, called after ``loss.backward()``
to wait for the all-reduces and leave the *averaged* gradient in every ``p.grad``. Both run on
3 real ranks (local backend, which counts what it moves) for two bucket caps.
"""

from __future__ import annotations

import numpy as np

from parlab.parallel.data_parallel import bucket_bytes, bucket_plan

from .ranks import launch_learner_code
from .stub import refuse_stubs

WORLD = 3          # odd: dividing by 2 instead of the world size shows
STEPS = 3          # SGD steps compared with serial training
LR = 0.5
BATCH = 6          # global batch, divisible by WORLD
CAPS = (50_000, 10**9)  # bytes: several buckets for TinyGPT's ~0.4 MB of gradients, then one
ATOL, RTOL = 1e-5, 1e-4  # float32, the ranks sum in another order than serial backward


def _plan_cases(seed: int) -> list[tuple[list[int], int]]:
    rng = np.random.default_rng(seed)
    cases = [([4096, 256, 4096], 4300), ([10, 10, 10, 10], 20), ([7], 1), ([], 5),
             ([100, 1, 1], 1), ([5, 5, 5], 1000)]
    for _ in range(20):
        sizes = [int(v) for v in rng.integers(1, 1000, size=int(rng.integers(1, 12)))]
        cases.append((sizes, int(rng.integers(1, 3000))))
    return cases


def check_plan(make_buckets, seed: int = 0) -> None:
    refuse_stubs(make_buckets=make_buckets)
    for sizes, cap in _plan_cases(seed):
        got = make_buckets(list(sizes), cap)
        want = bucket_plan(sizes, cap)
        if [list(b) for b in got] != want:
            raise AssertionError(f"make_buckets({sizes}, cap_bytes={cap}) returned {got}, expected "
                                 f"{want}: take the parameters last to first and close a bucket as "
                                 f"soon as it holds cap_bytes or more")


def _train(comm, make_buckets, attach_hooks, cap: int) -> dict:
    import torch

    from parlab.parallel import batches
    from parlab.parallel.model import GPTConfig, TinyGPT

    def sgd(params):
        with torch.no_grad():
            for p in params:
                p -= LR * p.grad
                p.grad = None

    model = TinyGPT(GPTConfig(seed=0))  # the same replica on every rank
    params = list(model.parameters())
    sizes = [p.numel() * p.element_size() for p in params]
    plan = [list(b) for b in make_buckets(sizes, cap)]
    finish = attach_hooks(params, comm, plan)
    data = batches(BATCH, 32, seed=1, rank=comm.rank, world=comm.world_size)
    calls = []
    for _ in range(STEPS):
        x, y = next(data)
        with comm.recording() as events:
            model(x, y).backward()
            finish()
        calls.append([e.nbytes for e in events if e.kind == "op"])
        sgd(params)
    serial = TinyGPT(GPTConfig(seed=0))
    data = batches(BATCH, 32, seed=1)
    for _ in range(STEPS):
        x, y = next(data)
        serial(x, y).backward()
        sgd(serial.parameters())
    errs = [(n, float((p - q).detach().abs().max()),
             bool(torch.allclose(p.detach(), q.detach(), atol=ATOL, rtol=RTOL)))
            for (n, p), q in zip(model.named_parameters(), serial.parameters(), strict=True)]
    ops = sorted({e.op for e in events if e.kind == "op"})
    return {"calls": calls, "plan": plan, "sizes": sizes, "errs": errs, "ops": ops}


def _run(comm, make_buckets, attach_hooks) -> list[dict]:
    return [_train(comm, make_buckets, attach_hooks, cap) for cap in CAPS]


def check_bucketed_ddp(make_buckets, attach_hooks, seed: int = 0) -> None:
    """Check ``make_buckets`` on random cases, then train TinyGPT on 3 ranks with the learner's
    hooks for each cap of ``CAPS``: after ``STEPS`` SGD steps every parameter must equal serial
    training on the full batch (atol 1e-5, rtol 1e-4), and each step must run one all-reduce
    per bucket of the plan, of the bucket's bytes. Raises AssertionError with one line naming
    the first problem; a stub's NotImplementedError passes through."""
    check_plan(make_buckets, seed)
    per_rank = launch_learner_code(
        _run, WORLD, make_buckets, attach_hooks, stub="attach_hooks is still a stub",
        hint="does every rank start the buckets' all-reduces in the same order?", timeout=60)
    for rank, runs in enumerate(per_rank):
        for cap, run in zip(CAPS, runs, strict=True):
            want = bucket_bytes(run["sizes"], bucket_plan(run["sizes"], cap))
            for step, got in enumerate(run["calls"]):
                if got != want:
                    raise AssertionError(
                        f"rank {rank}, cap {cap:,} B, step {step}: the collectives carried "
                        f"{got or 'nothing'} (bytes), expected one all-reduce per bucket: {want}")
            if run["ops"] != ["all_reduce"]:
                raise AssertionError(f"rank {rank}: use all_reduce only, got {run['ops']}")
            bad = [(n, e) for n, e, ok in run["errs"] if not ok]
            if bad:
                name, err = bad[0]
                raise AssertionError(
                    f"rank {rank}, cap {cap:,} B: after {STEPS} SGD steps {name} differs from serial "
                    f"training by {err:.3g}: finish() must leave the gradient averaged over the "
                    f"{WORLD} ranks (sum, then divide by comm.world_size) in every p.grad")
    buckets = [len(r["plan"]) for r in per_rank[0]]
    print(f"bucketed DDP correct on {WORLD} ranks: the plan matches PyTorch's on "
          f"{len(_plan_cases(seed))} cases;\nwith caps of {', '.join(f'{c:,}' for c in CAPS)} bytes "
          f"({', '.join(map(str, buckets))} buckets) every step made one all-reduce per bucket\n"
          f"and {STEPS} steps gave the parameters of serial training on the full batch.")
