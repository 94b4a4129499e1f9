"""Checker for exercise 02 (ring all-reduce from send/recv): correct sums, ring-sized traffic,
and the ring's schedule: the one ``parlab.comm.algorithms.ring_schedule`` that the runtime runs
and chapter 02's figure draws."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from parlab.comm import CommError, RankError, launch
from parlab.comm.algorithms import block_bounds, ring_schedule
from parlab.costmodel import alphabeta

from .stub import StillAStub, refuse_stubs

# (shape, dtype) of the arrays each world size is checked on: sizes that n does not divide,
# fewer elements than ranks, several dimensions, integers as well as floats
SHAPES = [((1,), "float64"), ((3,), "float64"), ((10,), "float32"), ((7, 5), "float64"),
          ((2, 3, 4), "int64"), ((1001,), "float32"), ((50_003,), "float64")]
WORLD_SIZES = (2, 3, 4, 5)


def rank_data(rank: int, shape: tuple, dtype: str, seed: int) -> np.ndarray:
    """Rank ``rank``'s input: small integers, so any order of additions gives the exact sum."""
    rng = np.random.default_rng([seed, rank, len(shape), int(np.prod(shape))])
    return rng.integers(-100, 100, size=shape).astype(dtype)


def random_shapes(seed: int, count: int = 3) -> list[tuple[tuple[int, ...], str]]:
    """``count`` random (shape, dtype) cases: 1 to 3 dimensions, 1 to about 3,000 elements."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        dims = int(rng.integers(1, 4))
        shape = tuple(int(d) for d in rng.integers(1, [3000, 60, 15][dims - 1] + 1, size=dims))
        cases.append((shape, str(rng.choice(["float32", "float64", "int64"]))))
    return cases


def run_learner(comm, fn, seed: int, shapes: list) -> list:
    """On every rank: the learner's function on each test array, with the traffic it caused
    and the (destination, bytes) of each message it sent, in order."""
    out = []
    for shape, dtype in shapes:
        x = rank_data(comm.rank, shape, dtype, seed)
        comm.reset_traffic()
        with comm.recording() as events:
            got = fn(comm, x.copy())
        out.append((got, comm.traffic(), [(e.peer, e.nbytes) for e in events if e.kind == "send"]))
    return out


def scheduled_sends(n: int, rank: int, size: int, itemsize: int) -> list[tuple[str, int, int, int]]:
    """(phase, destination, block, bytes) of each message rank ``rank`` sends in the ring
    schedule, for an array of ``size`` elements cut into ``block_bounds(size, n)``."""
    bounds = block_bounds(size, n)
    return [(phase, dst, b, (bounds[b][1] - bounds[b][0]) * itemsize)
            for phase, moves in ring_schedule(n) for src, dst, b in moves if src == rank]


def check_schedule(case: str, n: int, rank: int, size: int, itemsize: int, sends: list) -> None:
    """AssertionError unless ``sends`` (destination, bytes) follow ``ring_schedule``."""
    want = scheduled_sends(n, rank, size, itemsize)
    assert len(sends) == len(want), (
        f"{case}: sent {len(sends)} messages; the ring sends 2(n-1) = {len(want)} (one per step)")
    for step, ((peer, nbytes), (phase, dst, block, expected)) in enumerate(zip(sends, want, strict=True)):
        assert peer == dst and nbytes == expected, (
            f"{case}: step {step + 1} ({phase}) sent {nbytes} bytes to rank {peer}; the ring schedule "
            f"(parlab.comm.algorithms.ring_schedule, chapter 02's figure) sends block {block} "
            f"({expected} bytes) to rank {dst}")


@contextmanager
def explain_failure(name: str = "ring_all_reduce") -> Iterator[None]:
    """Around a cell that launches the learner's function: a rank's error is printed as one
    line (and, for a bug in the learner's code, that rank's own traceback) instead of a chained
    traceback through the launcher."""
    try:
        yield
    except RankError as err:
        if err.exc_type == "NotImplementedError":
            print(f"{name} is not written yet (rank {err.rank} raised NotImplementedError): "
                  "write it above, then run this cell again.")
        else:
            print(f"rank {err.rank} raised {err.exc_type}; its traceback:")
            print(err.remote_traceback.rstrip())
    except CommError as err:
        print(f"{type(err).__name__}: {str(err).splitlines()[0]}")


def check_ring_all_reduce(fn, seed: int = 0) -> None:
    """Run ``fn(comm, x)`` on 2, 3, 4 and 5 ranks for every array of ``SHAPES`` and three random
    shapes per rank count (seeded by ``seed``): each rank must
    return the element-wise sum over ranks (same shape and dtype), using only send/recv, and
    send 2(n-1)/n of the array's bytes (the ring's traffic: each of the 2(n-1) steps sends one
    block of about 1/n of the data), in the order of ``ring_schedule`` (block (r-s-1) mod n in
    step s of the reduce-scatter, block (r-s) mod n in step s of the all-gather, blocks cut by
    ``block_bounds``). Raises AssertionError naming the first failing case; the stub's
    NotImplementedError passes through (at once, before any rank starts)."""
    refuse_stubs(ring_all_reduce=fn)
    for n in WORLD_SIZES:
        shapes = SHAPES + random_shapes(seed + n)
        try:
            per_rank = launch(run_learner, n, fn, seed, shapes, timeout=20)
        except RankError as err:
            if err.exc_type == "NotImplementedError":
                raise StillAStub(f"ring_all_reduce is still a stub (rank {err.rank})") from None
            raise AssertionError(f"your function failed on {n} ranks:\n{err}") from None
        for i, (shape, dtype) in enumerate(shapes):
            want = sum(rank_data(r, shape, dtype, seed) for r in range(n))
            nbytes = want.nbytes
            ideal = 2 * (n - 1) / n * nbytes
            slack = 2 * (n - 1) * want.itemsize + 0.01 * ideal
            for rank, results in enumerate(per_rank):
                got, traffic, sends = results[i]
                case = f"{n} ranks, shape {shape} {dtype}, rank {rank}"
                assert isinstance(got, np.ndarray), f"{case}: return a numpy array, got {type(got).__name__}"
                assert got.shape == want.shape and got.dtype == want.dtype, (
                    f"{case}: expected shape {want.shape} and dtype {want.dtype}, got {got.shape} {got.dtype}")
                wrong = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
                assert wrong.size == 0, (f"{case}: {wrong.size} of {want.size} elements differ from the sum, "
                                         f"first at flat index {wrong[0]}: {got.reshape(-1)[wrong[0]]} "
                                         f"instead of {want.reshape(-1)[wrong[0]]}")
                others = sorted(set(traffic) - {"p2p"})
                assert not others, f"{case}: use only send/recv, not the communicator's {', '.join(others)}"
                sent = traffic["p2p"].bytes_sent if "p2p" in traffic else 0
                assert abs(sent - ideal) <= slack, (
                    f"{case}: sent {sent:,} bytes; a ring all-reduce sends 2(n-1)/n of the "
                    f"{nbytes:,} bytes = {ideal:,.0f} (each rank sends n-1 blocks in the reduce-scatter "
                    f"and n-1 in the all-gather)")
                check_schedule(case, n, rank, want.size, want.itemsize, sends)
    model = alphabeta.traffic("all_reduce", "ring", 4, 1.0)[0]
    print(f"ring all-reduce correct on {', '.join(map(str, WORLD_SIZES))} ranks for {len(SHAPES) + 3} "
          f"shapes each;\nevery rank sent 2(n-1)/n of the data ({model:.2f}x on 4 ranks), "
          "block by block in the ring's schedule.")
