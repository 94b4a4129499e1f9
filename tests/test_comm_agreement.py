"""Every algorithm of the local backend compares the ranks' signatures before touching a peer's
bytes (attack review F1): a call whose ranks disagree on dtype, shape or root raises the same
one-line CollectiveMismatch, small or >= 1 MiB (shm_direct, single-copy), never reinterprets
bytes or waits for the timeout."""

from __future__ import annotations

import numpy as np
import pytest

from parlab.comm import CollectiveMismatch, RankError, World
from parlab.comm.algorithms import CHOICES
from parlab.comm.local import DIRECT_MIN_BYTES

N = 3  # 3 ranks: the default large all-reduce of the world is shm_direct from 3 on
ROOTED = ("broadcast", "reduce", "gather", "scatter")
SIZES = {"small": 3 * 4, "large": 3 * (DIRECT_MIN_BYTES // 4)}  # float32 elements
# every (op, algorithm, size class), the default algorithm too; rank 1 passes another shape of
# the same bytes (small) or another dtype of the same bytes (large); and ranks that disagree on
# the root of a large broadcast (shm_direct: no message, every rank believes it is the root)
CASES = [(op, algo, size, "shape" if size == "small" else "dtype")
         for op, algos in CHOICES.items() if op != "barrier"
         for algo in (*algos, None) for size in SIZES
         if algo is not None or op in ("broadcast", "all_reduce")]
CASES += [("broadcast", algo, "large", "root") for algo in ("shm_direct", None)]
# ranks that disagree on the root of a small broadcast or scatter: the message left unreceived
# at the end is named as the mismatch it is. (Two roots of a reduce or gather both wait to
# receive, and no message ever travels: that deadlock is still a CommTimeout.)
CASES += [(op, algo, "small", "root") for op in ("broadcast", "scatter") for algo in CHOICES[op]]


def wrong_call(comm, op: str, algo: str | None, size: str, fault: str):
    """Rank 1 disagrees with the others on ``fault``."""
    elems, odd = SIZES[size], comm.rank == 1
    x = np.ones(elems, np.int32 if odd and fault == "dtype" else np.float32)
    if odd and fault == "shape":
        x = x.reshape(3, elems // 3)
    kwargs = {} if algo is None else {"algorithm": algo}
    if op in ROOTED:
        kwargs["dst" if op in ("reduce", "gather") else "src"] = comm.rank if fault == "root" else 0
    getattr(comm, op)(x, **kwargs)


@pytest.fixture(scope="module")
def world3():
    with World(N, timeout=60) as world:
        yield world


@pytest.mark.parametrize("op, algo, size, fault", CASES)
def test_a_mismatched_call_raises_collective_mismatch_on_every_algorithm(world3, op, algo, size, fault):
    with pytest.raises(RankError) as err:
        world3.run(wrong_call, op, algo, size, fault)
    cause = err.value.__cause__
    assert isinstance(cause, CollectiveMismatch), str(err.value)
    text = str(cause)
    assert "\n" not in text
    assert f"is in {op} #0 (" in text and "but rank" in text
    assert "every rank of a group must call the same collectives" in text
