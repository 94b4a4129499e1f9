"""Every collective, on both backends, equals a numpy reference for 1-5 ranks and awkward shapes.

Each (backend, world size) is one launch that runs every case; the tests then compare. Inputs
are small integers, so sums are exact whatever the order and every algorithm must agree to the
bit. A small ring capacity and chunk size make the local backend wrap its rings, split messages
and fall back to private copies, the paths a big run takes.
"""

from __future__ import annotations

import sys

import cloudpickle
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parlab.comm import algorithms, launch

pytestmark = pytest.mark.usefixtures("warm_launches")  # launch runs on warm ranks (conftest)

cloudpickle.register_pickle_by_value(sys.modules[__name__])

SHAPES = [(), (1,), (7,), (3, 5), (2, 3, 4), (0,), (40_003,)]
BLOCK_SHAPES = [(1,), (3,), (2, 5), (10_001,)]  # per-rank blocks (reduce-scatter, scatter, all-to-all)
# every algorithm the runtime has (the cost model's table), and the default (None)
ALGOS = {op: [*algorithms.CHOICES[op], None] for op in algorithms.CHOICES if op != "barrier"}
OPS = ["sum", "max", "min", "prod", "avg"]
WORLD_SIZES = [1, 2, 3, 4, 5]
BACKENDS = ["local", "torch"]


def data(rank: int, shape: tuple, op: str = "sum", dtype=np.float64) -> np.ndarray:
    """Rank ``rank``'s input: small integers (1..3 for prod) so every order of reduction is exact."""
    rng = np.random.default_rng(1000 + 17 * rank + len(shape))
    lo, hi = (1, 4) if op == "prod" else (-50, 50)
    return rng.integers(lo, hi, size=shape).astype(dtype)


def cases(n: int) -> list[tuple]:
    """(name, op, algorithm, shape, reduce op, root) of every case for n ranks."""
    out = []
    for shape in SHAPES:
        for algo in ALGOS["all_reduce"]:
            for op in OPS if shape == (3, 5) else ["sum"]:
                out.append(("all_reduce", algo, shape, op, -1))
        for algo in ALGOS["all_gather"]:
            out.append(("all_gather", algo, shape, "", -1))
        for op_name in ("broadcast", "reduce", "gather"):
            for algo in ALGOS[op_name]:
                out.append((op_name, algo, shape, "sum" if op_name == "reduce" else "", (n - 1) // 2))
    for block in BLOCK_SHAPES:
        shape = (n * block[0], *block[1:])
        for algo in ALGOS["reduce_scatter"]:
            for op in ("sum", "max", "avg"):
                out.append(("reduce_scatter", algo, shape, op, -1))
        for algo in ALGOS["scatter"]:
            out.append(("scatter", algo, shape, "", n - 1))
        for algo in ALGOS["all_to_all"]:
            out.append(("all_to_all", algo, shape, "", -1))
    return out


def run_cases(comm, small: bool) -> dict:
    """On every rank: run every case, return {case: (type name, result as numpy or None)}."""
    if small:  # many small pieces: rings wrap, messages split, sends spill to private copies
        import parlab.comm.algorithms as algorithms

        algorithms.CHUNK_BYTES = 32 << 10
    results = {}
    for case in cases(comm.world_size):
        op_name, algo, shape, op, root = case
        x = data(comm.rank, shape, op or "sum")
        kwargs = {"algorithm": algo}
        if op:
            kwargs["op"] = op
        if root >= 0:
            kwargs["src" if op_name in ("broadcast", "scatter") else "dst"] = root
        y = getattr(comm, op_name)(x, **kwargs)
        results[case] = (type(y).__name__, y)
    comm.barrier()
    return results


def reference(case: tuple, n: int, rank: int):
    """What rank ``rank`` must return, computed by numpy from every rank's input."""
    op_name, _, shape, op, root = case
    xs = [data(r, shape, op or "sum") for r in range(n)]
    if op_name in ("all_reduce", "reduce", "reduce_scatter"):
        fn = {"sum": np.sum, "avg": np.mean, "max": np.max, "min": np.min, "prod": np.prod}[op]
        total = fn(np.stack(xs), axis=0)
        if op_name == "reduce":
            return total if rank == root else None
        if op_name == "reduce_scatter":
            k = shape[0] // n
            return total[rank * k:(rank + 1) * k]
        return total
    if op_name == "broadcast":
        return xs[root]
    stacked = np.concatenate([x.reshape(1) if x.ndim == 0 else x for x in xs])
    if op_name == "all_gather":
        return stacked
    if op_name == "gather":
        return stacked if rank == root else None
    k = shape[0] // n
    if op_name == "scatter":
        return xs[root][rank * k:(rank + 1) * k]
    return np.concatenate([xs[j][rank * k:(rank + 1) * k] for j in range(n)])  # all_to_all


_RESULTS: dict = {}


def results(backend: str, n: int) -> list[dict]:
    """One launch per (backend, n), shared by the tests below."""
    if (backend, n) not in _RESULTS:
        _RESULTS[(backend, n)] = launch(run_cases, n, backend == "local", backend=backend,
                                        capacity=64 << 10, timeout=60)
    return _RESULTS[(backend, n)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_collective_matches_numpy(backend: str, n: int):
    per_rank = results(backend, n)
    for case in cases(n):
        for rank in range(n):
            kind, got = per_rank[rank][case]
            want = reference(case, n, rank)
            if want is None:
                assert got is None, (case, rank)
                continue
            assert kind == "ndarray", (case, rank, kind)  # numpy in, numpy out
            assert got.dtype == want.dtype and got.shape == want.shape, (case, rank, got.shape, want.shape)
            np.testing.assert_array_equal(got, want, err_msg=f"{backend} {case} rank {rank}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [3, 5])
def test_same_function_gives_identical_bits_on_both_backends(n: int):
    """Not only the reference: both backends return the very same arrays, every case."""
    local, torch_ = results("local", n), results("torch", n)
    for rank in range(n):
        for case, (_, got) in local[rank].items():
            other = torch_[rank][case][1]
            if got is None:
                assert other is None
            else:
                assert got.tobytes() == other.tobytes(), (case, rank)


def tensors(comm) -> dict:
    """torch in, torch out, for several dtypes, on either backend."""
    import torch

    out = {}
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.float16):
        x = torch.arange(6, dtype=dtype).reshape(2, 3) + comm.rank
        out[str(dtype)] = {
            "all_reduce": comm.all_reduce(x, algorithm="ring"),
            "default": comm.all_reduce(x),
            "all_gather": comm.all_gather(x),
            "broadcast": comm.broadcast(x, src=comm.world_size - 1),
        }
        if dtype.is_floating_point:
            out[str(dtype)]["avg"] = comm.all_reduce(x, op="avg")
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_tensors_come_back_as_torch_tensors(backend: str):
    import torch

    n = 3
    per_rank = launch(tensors, n, backend=backend)
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.float16):
        base = torch.arange(6, dtype=dtype).reshape(2, 3)
        total = sum(base + r for r in range(n))
        for got in per_rank:
            got = got[str(dtype)]
            for name in ("all_reduce", "default"):
                assert isinstance(got[name], torch.Tensor) and got[name].dtype == dtype
                assert torch.equal(got[name], total), (backend, dtype, name)
            assert torch.equal(got["all_gather"], torch.cat([base + r for r in range(n)]))
            assert torch.equal(got["broadcast"], base + n - 1)
            if dtype.is_floating_point:
                assert torch.equal(got["avg"], total / n)


def ring_sum(comm, shape, dtype):
    return comm.all_reduce(data(comm.rank, tuple(shape), dtype=dtype), algorithm="ring")


@given(n=st.integers(1, 5), shape=st.lists(st.integers(0, 9), max_size=3),
       dtype=st.sampled_from(["float32", "float64", "int32"]))
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_ring_all_reduce_equals_the_sum_for_any_world_size_and_shape(n, shape, dtype):
    want = sum(data(r, tuple(shape), dtype=dtype) for r in range(n))
    for got in launch(ring_sum, n, shape, dtype):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
