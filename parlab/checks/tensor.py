"""Checker for exercise 05 (column- and row-parallel linear layers with f and g): outputs and
gradients equal ``torch.nn.Linear``'s, and the layers move exactly Megatron's traffic
(Shoeybi et al. 2019, Section 3): column-parallel forward nothing, backward one all-reduce of dX
(``f``); row-parallel forward one all-reduce of Y (``g``), backward nothing; the MLP (column,
GeLU, row) one all-reduce each way. The counts are the cost model's
(``parlab.costmodel.pricing.tensor_parallel``: two such pairs per transformer layer).

The learner's functions run on real ranks (``launch``, local backend: it counts the bytes it
moves), as ``column_parallel_linear(x, weight, bias, comm)`` and
``row_parallel_linear(x, weight, bias, comm)``, where ``weight`` and ``bias`` are this rank's
slices of an ``nn.Linear``'s (``weight`` is (out, in), so a column split keeps rows of it).
"""

from __future__ import annotations

import numpy as np

from parlab.parallel.tensor_parallel import shard

from .ranks import launch_learner_code

TPS = (2, 3, 4)  # one launch of 4 ranks; the TP groups are ranks 0..t-1
CASES_PER_TP = 3
DTYPE_BYTES = 8  # float64: exact enough that any real mistake stands out
TOL = 1e-9


def _shapes(seed: int, t: int) -> list[tuple[int, int, int, int]]:
    """(batch, seq, in, out) cases for tp = t; in and out multiples of t."""
    rng = np.random.default_rng([seed, t])
    return [(int(rng.integers(1, 4)), int(rng.integers(1, 6)), t * int(rng.integers(1, 5)),
             t * int(rng.integers(1, 5))) for _ in range(CASES_PER_TP)]


class _Case:
    """Records what one call moved, forward and backward, and compares tensors."""

    def __init__(self, comm, label: str):
        self.comm, self.label, self.problems = comm, label, []

    def run(self, forward, backward):
        self.comm.reset_traffic()
        with self.comm.recording() as fwd:
            y = forward()
        with self.comm.recording() as bwd:
            backward(y)
        ops = lambda events: [(e.op, e.nbytes) for e in events if e.kind == "op"]  # noqa: E731
        return y, ops(fwd), ops(bwd)

    def close(self, name: str, got, want, hint: str) -> None:
        if got is None:
            self.problems.append(f"{self.label}: {name} is None (no gradient reached it): {hint}")
            return
        if tuple(got.shape) != tuple(want.shape):
            self.problems.append(f"{self.label}: {name} has shape {tuple(got.shape)}, expected "
                                 f"{tuple(want.shape)}")
            return
        if not want.numel():
            return
        err = float((got.detach() - want.detach()).abs().max())
        if not err <= TOL * (1 + float(want.detach().abs().max())):
            self.problems.append(f"{self.label}: {name} differs from torch.nn.Linear's by {err:.3g} "
                                 f"(max abs): {hint}")

    def traffic(self, phase: str, got: list, want: list, hint: str) -> None:
        if sorted(got) != sorted(want):
            say = ", ".join(f"{op} of {n:,} B" for op, n in got) or "nothing"
            need = ", ".join(f"{op} of {n:,} B" for op, n in want) or "nothing"
            self.problems.append(f"{self.label}: the {phase} moved {say}; it should move {need}: {hint}")


def _problem(b: int, s: int, k: int, m: int, seed: int):
    """The serial ``nn.Linear(k, m)`` (float64, seeded), an input x (b, s, k) that wants its
    gradient, and an output gradient dY (b, s, m), all drawn from one generator."""
    import torch

    g = torch.Generator().manual_seed(seed)
    serial = torch.nn.Linear(k, m, dtype=torch.float64)
    with torch.no_grad():
        serial.weight.copy_(torch.randn(m, k, generator=g, dtype=torch.float64))
        serial.bias.copy_(torch.randn(m, generator=g, dtype=torch.float64))
    x = torch.randn(b, s, k, generator=g, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(b, s, m, generator=g, dtype=torch.float64)  # (b, s, m)
    return serial, x, dy


def _column(comm, fn, b, s, k, m, seed):
    import torch

    t, r = comm.world_size, comm.rank
    serial, x, dy = _problem(b, s, k, m, seed)
    serial(x).backward(dy)
    dx_want, x.grad = x.grad.clone(), None
    w = shard(serial.weight.detach(), r, t, 0).clone().requires_grad_()  # (m/t, k): rows = columns of A
    bias = shard(serial.bias.detach(), r, t, 0).clone().requires_grad_()
    case = _Case(comm, f"column_parallel_linear, tp={t}, rank {r}, x {(b, s, k)} -> {m} features")
    y, fwd, bwd = case.run(lambda: fn(x, w, bias, comm), lambda y: y.backward(shard(dy, r, t, -1)))
    with torch.no_grad():
        want = shard(serial(x), r, t, -1)
    case.close("the output Y_i", y, want, "rank i computes X A_i + b_i, its block of Y's columns")
    case.close("dX", x.grad, dx_want,
               "f's backward must all-reduce the input gradient (each rank holds one term dY_i A_i^T)")
    case.close("the weight gradient", w.grad, shard(serial.weight.grad, r, t, 0), "dA_i = X^T dY_i")
    case.close("the bias gradient", bias.grad, shard(serial.bias.grad, r, t, 0), "db_i sums dY_i")
    case.traffic("forward", fwd, [], "f is the identity in the forward pass")
    case.traffic("backward", bwd, [("all_reduce", b * s * k * DTYPE_BYTES)],
                 "f all-reduces dX once, nothing else")
    return case.problems


def _row(comm, fn, b, s, k, m, seed):
    t, r = comm.world_size, comm.rank
    serial, x, dy = _problem(b, s, k, m, seed + 1)
    y_want = serial(x)
    y_want.backward(dy)
    x_i = shard(x.detach(), r, t, -1).clone().requires_grad_()  # (b, s, k/t): X split by columns
    w = shard(serial.weight.detach(), r, t, 1).clone().requires_grad_()  # (m, k/t): rows of A
    bias = serial.bias.detach().clone().requires_grad_()
    case = _Case(comm, f"row_parallel_linear, tp={t}, rank {r}, x {(b, s, k)} -> {m} features")
    y, fwd, bwd = case.run(lambda: fn(x_i, w, bias, comm), lambda y: y.backward(dy))
    case.close("the output Y", y, y_want, "g all-reduces the partial products X_i A_i, then adds b once")
    case.close("dX_i", x_i.grad, shard(x.grad, r, t, -1), "dX_i = dY A_i^T, no communication")
    case.close("the weight gradient", w.grad, shard(serial.weight.grad, r, t, 1), "dA_i = X_i^T dY")
    case.close("the bias gradient", bias.grad, serial.bias.grad,
               "add the bias after the all-reduce (g's backward is the identity)")
    case.traffic("forward", fwd, [("all_reduce", b * s * m * DTYPE_BYTES)], "g all-reduces Y once")
    case.traffic("backward", bwd, [], "g is the identity in the backward pass")
    return case.problems


def _mlp(comm, column, row, b, s, h, seed):
    """Megatron's MLP: column-parallel h -> 4h, GeLU on each block, row-parallel 4h -> h."""
    import torch
    import torch.nn.functional as F

    t, r = comm.world_size, comm.rank
    g = torch.Generator().manual_seed(seed + 2)
    fc1, fc2 = torch.nn.Linear(h, 4 * h, dtype=torch.float64), torch.nn.Linear(4 * h, h, dtype=torch.float64)
    with torch.no_grad():  # the same weights on every rank, whatever its RNG did before
        for p in (fc1.weight, fc1.bias, fc2.weight, fc2.bias):
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
    x = torch.randn(b, s, h, generator=g, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(b, s, h, generator=g, dtype=torch.float64)
    want = fc2(F.gelu(fc1(x)))
    want.backward(dy)
    dx_want, x.grad = x.grad.clone(), None
    w1 = shard(fc1.weight.detach(), r, t, 0).clone().requires_grad_()
    b1 = shard(fc1.bias.detach(), r, t, 0).clone().requires_grad_()
    w2 = shard(fc2.weight.detach(), r, t, 1).clone().requires_grad_()
    b2 = fc2.bias.detach().clone().requires_grad_()
    case = _Case(comm, f"the MLP (column, GeLU, row), tp={t}, rank {r}, x {(b, s, h)}")
    y, fwd, bwd = case.run(lambda: row(F.gelu(column(x, w1, b1, comm)), w2, b2, comm),
                           lambda y: y.backward(dy))
    case.close("the output", y, want, "column then row needs no communication in between")
    case.close("dX", x.grad, dx_want, "f's all-reduce in the backward")
    case.close("the first weight's gradient", w1.grad, shard(fc1.weight.grad, r, t, 0), "dA_i = X^T dY_i")
    one = [("all_reduce", b * s * h * DTYPE_BYTES)]
    case.traffic("forward", fwd, one, "Megatron's MLP all-reduces once forward (g)")
    case.traffic("backward", bwd, one, "and once backward (f)")
    return case.problems


def _run_cases(world, column, row, seed: int) -> list[str]:
    """On every rank of a 4-rank launch: each TP degree's cases on the group of ranks 0..t-1."""
    problems: list[str] = []
    for t in TPS:
        comm = world.new_group(list(range(t)))
        if comm is None:
            continue
        for i, (b, s, k, m) in enumerate(_shapes(seed, t)):
            problems += _column(comm, column, b, s, k, m, seed + 10 * i)
            problems += _row(comm, row, b, s, k, m, seed + 10 * i)
        problems += _mlp(comm, column, row, 2, 3, 2 * t, seed)
    return problems


def check_tensor_parallel_linear(column_parallel_linear, row_parallel_linear, seed: int = 0) -> None:
    """Run the learner's two layers on TP groups of 2, 3 and 4 ranks (local backend), on
    ``CASES_PER_TP`` random shapes each and the MLP built from them: every output and gradient
    must equal ``torch.nn.Linear``'s (float64), and the traffic must be Megatron's. Raises
    AssertionError naming the first failing case in one line; a stub's NotImplementedError
    passes through as NotImplementedError."""
    per_rank = launch_learner_code(
        _run_cases, max(TPS), column_parallel_linear, row_parallel_linear, seed,
        stub="the layers are still a stub",
        hint="does every rank of the group make the same collective calls?", timeout=30)
    for problems in per_rank:
        if problems:
            raise AssertionError(problems[0])
    cases = len(TPS) * (2 * CASES_PER_TP + 1)
    print(f"column- and row-parallel linear layers correct on tp = {', '.join(map(str, TPS))} "
          f"({cases} cases, every rank):\noutputs and gradients equal torch.nn.Linear's; each layer "
          "all-reduces once\n(column: dX in the backward, row: Y in the forward), the MLP once each way.")
