"""The runtime's algorithms against the cost model: one table of names, the bytes each rank
moves equal to the model's, replicas bit-identical after every all-reduce, and the ring's one
schedule (the runtime's, exercise 02's and chapter 02's figure)."""

from __future__ import annotations

import math
import sys

import cloudpickle
import numpy as np
import pytest

from parlab.comm import algorithms, launch
from parlab.comm import arrays as A
from parlab.costmodel import alphabeta, trees

pytestmark = pytest.mark.usefixtures("warm_launches")  # launch runs on warm ranks (conftest)

cloudpickle.register_pickle_by_value(sys.modules[__name__])

ELEMS = 120  # float64 elements per rank: divisible by 1..5 and by 2, so every block is exact


def test_the_runtime_runs_exactly_the_algorithms_the_cost_model_prices():
    for op, impls in algorithms.TABLE.items():
        assert set(impls) == set(alphabeta.ALGORITHMS[op]), op
        assert algorithms.CHOICES[op] == alphabeta.ALGORITHMS[op]
    assert set(alphabeta.ALGORITHMS) - set(algorithms.TABLE) == {"p2p"}


def test_no_algorithm_is_called_tree_without_saying_which_tree():
    names = {a for names in alphabeta.ALGORITHMS.values() for a in names}
    assert "tree" not in names and {"binomial_tree", "double_binary_tree", "recursive_doubling"} <= names


def _call(comm, op: str, algorithm: str, x: np.ndarray):
    if op == "barrier":
        return comm.barrier(algorithm=algorithm)
    kwargs = {"src": comm.world_size - 1} if op in ("broadcast", "scatter") else {}
    kwargs |= {"dst": comm.world_size - 1} if op in ("reduce", "gather") else {}
    return getattr(comm, op)(x, algorithm=algorithm, **kwargs)


def counted(comm, chunk_bytes: int) -> dict:
    """On every rank: bytes sent and received by each (op, algorithm), small chunks so that the
    pipelined algorithms really stream several chunks."""
    algorithms.CHUNK_BYTES = chunk_bytes
    out = {}
    for op, names in algorithms.CHOICES.items():
        for algorithm in names:
            x = np.arange(ELEMS, dtype=np.float64) + comm.rank
            comm.reset_traffic()
            _call(comm, op, algorithm, x)
            t = comm.traffic().get(op)
            out[(op, algorithm)] = (t.bytes_sent, t.bytes_recv) if t else (0, 0)
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_every_algorithm_moves_exactly_the_bytes_the_model_counts(n):
    per_rank = launch(counted, n, 64, timeout=60)  # 64 B chunks: 8 float64 per chunk
    for (op, algorithm), _ in per_rank[0].items():
        full = ELEMS * 8 * (n if op in ("all_gather", "gather") else 1)
        root = n - 1 if op in ("broadcast", "scatter", "reduce", "gather") else 0
        for rank in range(n):
            want = alphabeta.traffic(op, algorithm, n, full, rank, root)
            assert per_rank[rank][(op, algorithm)] == want, (op, algorithm, n, rank)


def test_a_4_gib_broadcast_moves_the_buffer_about_once_with_the_ring_and_log2_p_times_with_a_tree():
    n, size = 8, 4 * 2**30
    ring = [alphabeta.traffic("broadcast", "ring", n, size, r) for r in range(n)]
    assert max(s for s, _ in ring) == size and sum(s for s, _ in ring) == (n - 1) * size
    assert alphabeta.traffic("broadcast", "binomial_tree", n, size, 0)[0] == 3 * size


def reduced_bits(comm, dtype: str, op: str, algorithm: str, seed: int) -> bytes:
    """Random non-integer data (every order of rounding differs), all-reduced; the raw bytes."""
    rng = np.random.default_rng([seed, comm.rank])
    x = rng.normal(size=257) + (1j * rng.normal(size=257) if dtype.startswith("complex") else 0)
    x = x.astype(dtype)
    if op in ("max", "min"):  # signed zeros: max(0.0, -0.0) depends on the order of the operands
        x[:64] = np.where(np.arange(64) % 2 == comm.rank % 2, 0.0, -0.0).astype(dtype)
    return comm.all_reduce(x, op=op, algorithm=algorithm).tobytes()


CANONICAL = [(dtype, op) for dtype in ("complex64", "complex128", "float32", "float64", "float16")
             for op in ("sum", "prod", "max", "min", "avg")
             if not (dtype.startswith("complex") and op in ("max", "min"))]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("n", [2, 3, 4, 5])
@pytest.mark.parametrize("algorithm", algorithms.CHOICES["all_reduce"])
def test_every_rank_holds_the_same_bits_after_an_all_reduce(algorithm, n):
    """Issue 8 item 2: complex64 prod with recursive doubling differed between ranks."""
    def every_case(comm):
        return [reduced_bits(comm, dtype, op, algorithm, seed)
                for dtype, op in CANONICAL for seed in range(2)]

    per_rank = launch(every_case, n, timeout=60)
    for i, bits in enumerate(per_rank[0]):
        case = CANONICAL[i // 2]
        assert all(other[i] == bits for other in per_rank[1:]), (algorithm, n, case)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("algorithm", ["recursive_doubling", "double_binary_tree"])
def test_same_bits_on_every_rank_on_the_torch_backend_too(algorithm):
    def cases(comm):
        return [reduced_bits(comm, "complex64", "prod", algorithm, s) for s in range(3)]

    per_rank = launch(cases, 4, backend="torch", timeout=60)
    assert all(r == per_rank[0] for r in per_rank[1:])


@pytest.mark.parametrize("p", range(1, 70))
def test_the_double_binary_tree_is_two_spanning_trees_of_depth_log2_p(p):
    for tree in trees.double_binary_tree(p):
        roots = [r for r, (parent, _) in enumerate(tree) if parent < 0]
        assert len(roots) == 1
        for r, (parent, children) in enumerate(tree):
            assert len(children) <= 2 and all(tree[c][0] == r for c in children)
            assert parent < 0 or r in tree[parent][1]
        reached, frontier = set(), roots
        while frontier:
            reached |= set(frontier)
            frontier = [c for r in frontier for c in tree[r][1]]
        assert reached == set(range(p))
        assert trees.depth(tree) == (math.ceil(math.log2(p)) if p > 1 else 0)
    per_rank = trees.all_reduce_traffic(p, 1.0)
    assert max((max(s, r) for s, r, _ in per_rank), default=0) <= 2.0  # full bandwidth: ~2n


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
def test_the_ring_schedule_hands_each_partial_block_on_and_leaves_rank_r_with_block_r(n):
    for r in range(n):
        steps = algorithms.ring_steps(n, r)
        for phase in ("reduce-scatter", "all-gather"):
            mine = [(s, g) for ph, s, g in steps if ph == phase]
            assert len(mine) == n - 1
            for (_, got), (sent, _) in zip(mine, mine[1:], strict=False):
                assert got == sent  # what arrives is what goes out next
        if n > 1:
            rs = [g for ph, _, g in steps if ph == "reduce-scatter"]
            ag = [s for ph, s, _ in steps if ph == "all-gather"]
            assert rs[-1] == r and ag[0] == r  # block r is finished on rank r, then shared


def test_the_default_is_latency_optimal_for_small_messages_and_the_ring_for_large_ones():
    small, large = algorithms.SMALL_MAX_BYTES - 1, algorithms.SMALL_MAX_BYTES
    assert algorithms.default("all_reduce", small, 8) == "recursive_doubling"
    assert algorithms.default("broadcast", small, 8) == "binomial_tree"
    assert {algorithms.default(op, large, 8) for op in ("all_reduce", "broadcast", "reduce")} == {"ring"}


def test_reduce_arrays_puts_the_first_operand_first():
    """The order the recursive doubling relies on: out = op(acc, other)."""
    a, b = np.array([1 + 2j], np.complex64), np.array([3 - 1j], np.complex64)
    out = np.empty_like(a)
    A.reduce_arrays(a, b, "prod", out=out)
    assert out.tobytes() == (a * b).tobytes()


def direct_paths(comm) -> dict:
    """shm_direct on the world (direct reads of the shared windows) and on a sub-group (the
    same exchange as messages): results, counted bytes, and what the default picks."""
    from parlab.comm.local import DIRECT_MIN_BYTES

    out = {}
    n = comm.world_size
    big = np.arange(DIRECT_MIN_BYTES // 4 + 3, dtype=np.float32) % 11 + comm.rank
    sub = comm.new_group(list(range(n - 1)))
    for name, c in (("world", comm), ("group", sub)):
        if c is None:
            continue
        c.reset_traffic()
        x = np.arange(ELEMS, dtype=np.float64) + comm.rank
        y = c.all_reduce(x, algorithm="shm_direct")
        t = c.traffic()["all_reduce"]
        out[name] = (y.tobytes(), t.bytes_sent, t.bytes_recv, c.world_size, c.rank)
        out[name + " default"] = c._algorithm("all_reduce", None, big.nbytes)
        out[name + " big"] = c.all_reduce(big).tobytes()
    return out


def test_shm_direct_reads_the_windows_on_the_world_and_sends_messages_on_a_group():
    from parlab.comm import World

    with World(4, capacity=1 << 16) as world:  # 64 KiB windows: many chunks, slots reused
        per_rank = world.run(direct_paths)
    full = ELEMS * 8
    for name in ("world", "group"):
        here = [r for r in per_rank if name in r]
        assert all(r[name][0] == here[0][name][0] for r in here)  # the same bits everywhere
        assert all(r[name + " big"] == here[0][name + " big"] for r in here)
        for r in here:
            _, sent, recvd, p, rank = r[name]
            assert (sent, recvd) == alphabeta.traffic("all_reduce", "shm_direct", p, full, rank)
    x = sum(np.arange(ELEMS, dtype=np.float64) + r for r in range(4))
    assert per_rank[0]["world"][0] == x.tobytes()
    assert per_rank[0]["world default"] == "shm_direct"  # large, 3+ ranks, the world
    assert per_rank[0]["group default"] == "ring"  # a sub-group has no windows of its own


def direct_broadcasts(comm, path: str) -> dict:
    """shm_direct broadcasts from every root on the world, interleaved with shm_direct
    all-reduces (they share the slots and the counters), and on a sub-group (messages).
    ``path``: 'single_copy' (each peer reads the root's buffer in place) or 'windows' (through
    the root's shared window), whichever this machine allows for the first."""
    from parlab.comm.local import DIRECT_MIN_BYTES

    n, out = comm.world_size, {}
    big = DIRECT_MIN_BYTES // 4 + 5  # float32 elements: more chunks than slots
    direct = comm._direct()
    agreed = direct.single_copy()
    direct._single = agreed and path == "single_copy"
    out["path"] = "single_copy" if direct._single else "windows"
    try:
        for root in range(n):
            x = np.full(big, comm.rank, np.float32) + np.arange(big, dtype=np.float32) % 7
            comm.reset_traffic()
            x = comm.broadcast(x, src=root, inplace=root % 2 == 1)
            t = comm.traffic()["broadcast"]
            y = comm.all_reduce(np.arange(big, dtype=np.float32) % 5 + comm.rank)
            out[root] = (x.tobytes(), t.bytes_sent, t.bytes_recv, y.tobytes(), t.msgs_sent, t.msgs_recv)
    finally:
        direct._single = agreed
    out["default"] = comm._algorithm("broadcast", None, 4 * big)
    sub = comm.new_group(list(range(1, n)))
    if sub is not None:  # ranks 1.. n-1: the group's rank 0 is the world's rank 1
        z = np.arange(300, dtype=np.float64) + comm.rank
        z = sub.broadcast(z, src=0, algorithm="shm_direct")
        out["group"] = z.tobytes()
    return out


@pytest.mark.parametrize("path", ["single_copy", "windows"])
@pytest.mark.parametrize("n", [2, 4])
def test_shm_direct_broadcast_gives_every_rank_the_roots_buffer_and_the_modelled_bytes(n, path):
    from parlab.comm import World, single_copy

    with World(n, capacity=1 << 16) as world:  # 64 KiB windows: many chunks, slots reused
        per_rank = world.run(direct_broadcasts, path)
    if path == "single_copy" and single_copy.AVAILABLE and sys.platform.startswith("linux"):
        assert {r["path"] for r in per_rank} == {"single_copy"}  # the kernel lets ranks read
    assert len({r["path"] for r in per_rank}) == 1  # one protocol on every rank
    for root in range(n):
        want = per_rank[root][root][0]  # the root's own buffer, untouched by its broadcast
        for rank, got in enumerate(per_rank):
            assert got[root][0] == want, (root, rank)
            assert got[root][3] == per_rank[0][root][3]  # the all-reduce after it, bit-identical
            nbytes = len(want)
            assert got[root][1:3] == alphabeta.traffic("broadcast", "shm_direct", n, nbytes, rank, root)
            # one message per window-sized piece and peer, whichever path: what a rank reports
            # (chapter 02 prints it) must not depend on what the kernel allows
            pieces = -(-nbytes // (1 << 16))
            assert got[root][4:6] == ((n - 1) * pieces, 0) if rank == root else (0, pieces)
    assert {r["default"] for r in per_rank} == {"shm_direct"}  # large, the world, any n
    group = [r["group"] for r in per_rank if "group" in r]
    assert group and all(g == (np.arange(300, dtype=np.float64) + 1).tobytes() for g in group)


def one_rank_cannot_read_its_peers(comm) -> dict:
    """Rank 1 behaves as if the kernel refused it (a seccomp filter, Yama): the ranks try again,
    together, and must all keep the windows; then a broadcast still gives the root's bytes."""
    from parlab.comm import single_copy

    direct, available = comm._direct(), single_copy.AVAILABLE
    single_copy.AVAILABLE = available and comm.rank != 1
    direct._single = None  # probe again, all ranks at once
    try:
        agreed = direct.single_copy()
        x = comm.broadcast(np.arange(1 << 19, dtype=np.float32) + comm.rank, src=0)
    finally:
        single_copy.AVAILABLE, direct._single = available, None
    return {"agreed": agreed, "ok": x.tobytes() == np.arange(1 << 19, dtype=np.float32).tobytes()}


def wrong_size_broadcast(comm):
    elems = (1 << 19) + (comm.rank == 1)
    comm.broadcast(np.zeros(elems, np.float32), src=0)


def test_single_copy_needs_every_rank_and_a_wrong_size_is_named():
    from parlab.comm import World
    from parlab.comm.errors import RankError

    with World(3) as world:
        per_rank = world.run(one_rank_cannot_read_its_peers)
        assert [r["agreed"] for r in per_rank] == [False] * 3
        assert all(r["ok"] for r in per_rank)
        if world.run(lambda comm: comm._direct().single_copy())[0]:
            with pytest.raises(RankError, match=r"CollectiveMismatch: rank [01] is in broadcast #0 "
                               r"\(shape \(52428[89],\).* but rank [01] is in broadcast #0"):
                world.run(wrong_size_broadcast)
