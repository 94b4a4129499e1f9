"""Point-to-point semantics and sub-groups, the same on both backends."""

from __future__ import annotations

import sys

import cloudpickle
import numpy as np
import pytest

from parlab.comm import RankError, launch

pytestmark = pytest.mark.usefixtures("warm_launches")  # launch runs on warm ranks (conftest)

cloudpickle.register_pickle_by_value(sys.modules[__name__])
BACKENDS = ["local", "torch"]


def ordered_and_eager(comm) -> list:
    """Messages between two ranks arrive in order; send is eager, so both ranks may send a
    large message first and receive second (the classic deadlock of rendezvous sends)."""
    peer = 1 - comm.rank
    big = np.full(300_000, comm.rank, np.float64)  # 2.4 MB: more than the ring holds
    comm.send(big, peer)
    for i in range(5):
        comm.send(np.array([i, comm.rank]), peer)
    got = comm.recv(peer)
    small = [comm.recv(peer).tolist() for _ in range(5)]
    return [float(got.mean()), got.shape, small]


@pytest.mark.parametrize("backend", BACKENDS)
def test_messages_arrive_in_order_and_send_first_never_deadlocks(backend):
    r0, r1 = launch(ordered_and_eager, 2, backend=backend, capacity=64 << 10)
    assert r0 == [1.0, (300_000,), [[i, 1] for i in range(5)]]
    assert r1 == [0.0, (300_000,), [[i, 0] for i in range(5)]]


def receive_into(comm) -> list:
    if comm.rank == 0:
        comm.send(np.arange(12, dtype=np.int32).reshape(3, 4), 1)
        comm.send(np.ones(5, np.float32), 1)
        comm.send(np.full(3, 2.0), 1)
        return []
    out = np.zeros(12, np.int32)
    comm.recv(0, out=out)  # same dtype and size; the shape may differ
    acc = np.full(5, 10, np.float32)
    comm.recv_reduce(0, acc, op="sum")
    acc2 = np.full(3, 5.0)
    comm.recv_reduce(0, acc2, op="max")
    return [out.tolist(), acc.tolist(), acc2.tolist()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_recv_into_a_buffer_and_recv_reduce(backend):
    _, r1 = launch(receive_into, 2, backend=backend)
    assert r1 == [list(range(12)), [11.0] * 5, [5.0] * 3]


def wrong_size(comm):
    if comm.rank == 0:
        comm.send(np.ones(4, np.float32), 1)
    else:
        comm.recv(0, out=np.zeros(5, np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_receive_buffer_of_the_wrong_size_is_an_error_naming_both_sizes(backend):
    with pytest.raises(RankError, match=r"rank 1 posted a receive of 20 bytes .* rank 0 sent 16 bytes"):
        launch(wrong_size, 2, backend=backend)


def relay(comm) -> list:
    """recv_reduce_send and recv_copy_send: the fused steps of the ring, 0 -> 1 -> 2."""
    x = np.arange(20_000, dtype=np.float32) + comm.rank  # 80 KB: goes through the rings
    if comm.rank == 0:
        comm.send(x, 1)
        comm.send(x, 1)
        return []
    if comm.rank == 1:
        comm.recv_reduce_send(0, x, 2, op="sum")
        comm.recv_copy_send(0, x, 2)
        return [float(x[0])]  # recv_copy_send overwrote x with rank 0's data
    return [float(comm.recv(1)[0]), float(comm.recv(1)[0])]


@pytest.mark.parametrize("backend", BACKENDS)
def test_relay_steps_combine_and_forward(backend):
    _, r1, r2 = launch(relay, 3, backend=backend)
    assert r1 == [0.0]
    assert r2 == [1.0, 0.0]


def groups(comm) -> dict:
    """Sub-groups: split by parity, new_group, and messages of two groups interleaved."""
    even_odd = comm.split(comm.rank % 2)
    total = even_odd.all_reduce(np.array([comm.rank]))
    pair = comm.new_group([0, 1])
    out = {"split": (even_odd.rank, even_odd.world_size, int(total[0])), "pair": pair is not None}
    if pair is not None:
        # rank 0 sends on the pair group first, then on the world; rank 1 receives in the other
        # order: each group has its own ordering, so nothing is mixed up
        if comm.rank == 0:
            pair.send(np.array([10]), 1)
            comm.send(np.array([20]), 1)
        else:
            out["world"] = int(comm.recv(0)[0])
            out["pair_msg"] = int(pair.recv(0)[0])
        out["pair_sum"] = int(pair.all_reduce(np.array([comm.rank + 1]), algorithm="ring")[0])
    by_key = comm.split(0, key=-comm.rank)  # one group, ranks in reverse order
    out["reversed"] = by_key.rank
    out["world"] = out.get("world")
    comm.barrier()
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_sub_groups(backend):
    n = 4
    res = launch(groups, n, backend=backend)
    for r, got in enumerate(res):
        members = [m for m in range(n) if m % 2 == r % 2]
        assert got["split"] == (members.index(r), 2, sum(members))
        assert got["pair"] == (r < 2)
        assert got["reversed"] == n - 1 - r
    assert res[1]["world"] == 20 and res[1]["pair_msg"] == 10
    assert res[0]["pair_sum"] == res[1]["pair_sum"] == 3


def bad_arguments(comm, what):
    x = np.ones(4)
    if what == "peer":
        comm.send(x, comm.world_size)
    elif what == "algorithm":
        comm.all_reduce(x, algorithm="butterfly")
    elif what == "op":
        comm.all_reduce(x, op="mean")
    elif what == "avg_int":
        comm.all_reduce(np.ones(4, np.int32), op="avg")
    elif what == "blocks":
        comm.reduce_scatter(np.ones(5))
    elif what == "type":
        comm.send([1, 2, 3], 0)


@pytest.mark.parametrize("what, message", [
    ("peer", r"dst must be a rank in 0\.\.1, got 2"),
    ("algorithm", r"unknown algorithm 'butterfly' for all_reduce .* allowed: ring, double_binary_tree, recursive_doubling, naive"),
    ("op", r"unknown reduce op 'mean'; allowed: sum, prod, max, min, avg"),
    ("avg_int", r"op 'avg' needs a floating dtype .* got int32"),
    ("blocks", r"reduce_scatter splits dim 0 into world_size=2 equal blocks; got shape \(5,\)"),
    ("type", r"communicators move numpy arrays or torch tensors, got list"),
])
def test_bad_arguments_name_the_rule_and_the_value(what, message):
    with pytest.raises(RankError, match=message):
        launch(bad_arguments, 2, what)


def big_ring(comm):
    from parlab.comm import engine

    x = np.arange(300_000, dtype=np.float64) * (comm.rank + 1)
    y = comm.all_reduce(x, algorithm="ring")
    z = comm.all_reduce(x, algorithm="recursive_doubling")  # whole messages, far larger than the rings
    return engine.SHARED_POSITIONS, float(y[-1]), float(z[-1])


@pytest.mark.parametrize("shared", ["0", "1"])
def test_read_positions_by_frames_or_by_shared_memory_move_the_same_bytes(monkeypatch, shared):
    """arm64 cannot read the receiver's position from shared memory safely: it uses C frames."""
    monkeypatch.setenv("PARLAB_SHARED_POSITIONS", shared)
    want = 299_999.0 * (1 + 2 + 3)
    assert launch(big_ring, 3, capacity=64 << 10) == [(shared == "1", want, want)] * 3
