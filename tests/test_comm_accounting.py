"""Communicators count what they move; the counts agree with the cost model's bytes."""

from __future__ import annotations

import sys

import cloudpickle
import numpy as np
import pytest

from parlab.comm import algorithms, launch
from parlab.costmodel import alphabeta

pytestmark = pytest.mark.usefixtures("warm_launches")  # launch runs on warm ranks (conftest)

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def all_reduce_traffic(comm, elems, algorithm):
    comm.all_reduce(np.ones(elems, np.float32), algorithm=algorithm)
    return comm.traffic()["all_reduce"]


@pytest.mark.parametrize("n", [2, 3, 4, 5])
@pytest.mark.parametrize("elems", [1000, 100_003])
def test_ring_all_reduce_sends_2_n_minus_1_over_n_of_the_data_per_rank(n, elems):
    nbytes = 4 * elems
    ideal, _ = alphabeta.traffic("all_reduce", "ring", n, nbytes)
    assert ideal == pytest.approx(2 * (n - 1) / n * nbytes)
    for t in launch(all_reduce_traffic, n, elems, "ring"):
        # blocks differ by at most one element, in each of the 2(n-1) steps
        assert abs(t.bytes_sent - ideal) <= 2 * (n - 1) * 4
        assert abs(t.bytes_recv - ideal) <= 2 * (n - 1) * 4
        assert t.msgs_sent == t.msgs_recv == 2 * (n - 1)  # one slice: 2(n-1) messages
        assert t.calls == 1 and not t.nominal


def test_naive_all_reduce_loads_the_root():
    n, elems = 4, 1000
    per_rank = launch(all_reduce_traffic, n, elems, "naive")
    assert per_rank[0].bytes_recv == per_rank[0].bytes_sent == (n - 1) * 4 * elems
    for t in per_rank[1:]:
        assert t.bytes_sent == t.bytes_recv == 4 * elems


def broadcast_traffic(comm, root):
    comm.broadcast(np.ones(250, np.float32), src=root, algorithm="binomial_tree")
    t = comm.traffic()["broadcast"]
    return t.bytes_sent, t.bytes_recv


@pytest.mark.parametrize("root", [0, 2])
def test_binomial_tree_broadcast_traffic_equals_the_model_rank_by_rank(root):
    n = 5
    for rank, got in enumerate(launch(broadcast_traffic, n, root)):
        assert got == alphabeta.traffic("broadcast", "binomial_tree", n, 1000, rank, root)


def native_traffic(comm):
    comm.all_reduce(np.ones(1000, np.float32))
    comm.send(np.ones(10), (comm.rank + 1) % comm.world_size)
    comm.recv((comm.rank - 1) % comm.world_size)
    return comm.traffic()


def test_torch_native_collectives_report_nominal_ring_traffic():
    n = 4
    for t in launch(native_traffic, n, backend="torch"):
        assert t["all_reduce"].nominal
        assert t["all_reduce"].bytes_sent == 2 * (n - 1) / n * 4000
        assert not t["p2p"].nominal and t["p2p"].bytes_sent == 80 and t["p2p"].msgs_recv == 1


def recorded(comm):
    comm.send(np.ones(3), (comm.rank + 1) % comm.world_size)
    comm.recv((comm.rank - 1) % comm.world_size)
    comm.reset_traffic()
    with comm.recording() as events:
        comm.all_reduce(np.ones(30_000, np.float32), algorithm="ring")
    outside = comm.all_reduce(np.ones(3))  # not recorded
    del outside
    return events, comm.traffic()


def test_the_timeline_records_each_step_inside_its_collective():
    n = 3
    for rank, (events, traffic) in enumerate(launch(recorded, n)):
        op = [e for e in events if e.kind == "op"]
        steps = [e for e in events if e.kind != "op"]
        assert [e.op for e in op] == ["all_reduce"] and len(steps) == 4 * (n - 1)
        assert all(op[0].start <= e.start <= e.end <= op[0].end for e in steps)
        assert {e.peer for e in steps if e.kind == "send"} == {(rank + 1) % n}
        assert {e.peer for e in steps if e.kind == "recv"} == {(rank - 1) % n}
        assert "p2p" not in traffic and traffic["all_reduce"].calls == 2  # reset, then two calls


def ring_sends(comm, elems):
    with comm.recording() as events:
        comm.all_reduce(np.arange(elems, dtype=np.float32), algorithm="ring")
    return [(e.peer, e.nbytes) for e in events if e.kind == "send"]


@pytest.mark.parametrize("n, elems", [(3, 10), (4, 10), (5, 23)])
def test_the_run_follows_the_ring_schedule_block_by_block(n, elems):
    bounds = algorithms.block_bounds(elems, n)
    sends = launch(ring_sends, n, elems)
    for step, (_, moves) in enumerate(algorithms.ring_schedule(n)):
        for src, dst, block in moves:
            lo, hi = bounds[block]
            assert sends[src][step] == (dst, 4 * (hi - lo)), (src, step)
