"""``async_op=True``: Work handles whose results equal the blocking calls, in issue order, on
both backends; errors of a background operation surface at ``wait()`` and at the next call.
(That communication really overlaps compute is measured by ``parlab bench comm``, not here.)"""

from __future__ import annotations

import sys

import cloudpickle
import numpy as np
import pytest

from parlab.comm import RankError, Work

cloudpickle.register_pickle_by_value(sys.modules[__name__])

BIG = 300_003  # large enough to go through the rings in pieces (and shm_direct on 4 ranks)


def inputs(rank: int, n: int) -> dict:
    rng = np.random.default_rng(rank)
    return {"small": rng.integers(-9, 9, 7).astype(np.float64),
            "big": rng.integers(-9, 9, BIG).astype(np.float32),
            "blocks": rng.integers(-9, 9, 4 * n).astype(np.float64)}


def every_collective(comm, async_op: bool) -> list:
    """The same calls, blocking or issued all at once and waited for at the end."""
    d = inputs(comm.rank, comm.world_size)
    n, me = comm.world_size, comm.rank
    kw = {"async_op": True} if async_op else {}
    calls = [
        comm.all_reduce(d["small"], **kw),
        comm.all_reduce(d["big"], "max", **kw),
        comm.all_gather(d["small"], **kw),
        comm.reduce_scatter(d["blocks"], **kw),
        comm.broadcast(d["big"], n - 1, **kw),
        comm.all_reduce(d["big"], **kw),
    ]
    if async_op:
        assert all(isinstance(w, Work) for w in calls)
    sent = comm.send(d["small"] * me, (me + 1) % n, **kw)
    got = comm.recv((me - 1) % n, **kw)
    if async_op:
        calls = [w.wait() for w in calls]
        assert sent.wait() is None
        got = got.wait()
    return [c.tolist() for c in calls] + [got.tolist()]


def interleaved(comm) -> list:
    """Async calls mixed with blocking ones: the blocking ones see the issue order too."""
    d = inputs(comm.rank, comm.world_size)
    out = d["big"].copy()
    w1 = comm.all_reduce(out, inplace=True, async_op=True)
    blocking = comm.all_reduce(d["small"])  # waits for w1 first, then runs
    assert w1.is_completed()
    w2 = comm.all_gather(d["small"], async_op=True)
    w3 = comm.broadcast(out, 0, async_op=True)
    r3 = w3.wait()
    r2 = w2.wait()
    assert w1.wait() is out
    g = comm.new_group(list(range(comm.world_size)))
    w4 = g.all_reduce(d["small"], async_op=True)
    w5 = comm.all_reduce(d["small"], async_op=True)  # the group and the world share one order
    calls = comm.traffic()["all_reduce"].calls  # waits for every async op issued before it
    return [out.tolist(), blocking.tolist(), r2.tolist(), r3.tolist(), w4.wait().tolist(),
            w5.wait().tolist(), calls]


def reference_interleaved(comm) -> list:
    d = inputs(comm.rank, comm.world_size)
    out = comm.all_reduce(d["big"])
    blocking = comm.all_reduce(d["small"])
    r2 = comm.all_gather(d["small"])
    r3 = comm.broadcast(out, 0)
    g = comm.new_group(list(range(comm.world_size)))
    return [out.tolist(), blocking.tolist(), r2.tolist(), r3.tolist(), g.all_reduce(d["small"]).tolist(),
            comm.all_reduce(d["small"]).tolist(), 3]


def torch_tensors(comm) -> list:
    import torch

    x = torch.arange(6, dtype=torch.float32) + comm.rank
    w = comm.all_reduce(x, async_op=True)
    y = comm.all_gather(x, async_op=True)
    return [w.wait().tolist(), y.wait().tolist(), type(w.wait()).__name__]


def background_error(comm) -> str:
    if comm.rank == 0:
        w = comm.recv(1, async_op=True)  # rank 1 returns without sending: PeerGone at wait()
        try:
            w.wait()
        except Exception as err:  # noqa: BLE001
            first = type(err).__name__
        try:
            comm.barrier()  # the next call raises it too
        except Exception as err:  # noqa: BLE001
            return f"{first} then {type(err).__name__}"
        return "no error"
    return "returned"


def never_waited(comm) -> None:
    if comm.rank == 0:
        comm.recv(1, async_op=True)  # never waited for: the error still ends the run


def bad_argument(comm) -> str:
    try:
        comm.all_reduce(np.ones(3), "median", async_op=True)
    except ValueError as err:
        return str(err)
    return "accepted"


def test_async_results_equal_the_blocking_calls(world4):
    assert world4.run(every_collective, True) == world4.run(every_collective, False)


def test_async_and_blocking_calls_interleave_in_issue_order(world4):
    assert world4.run(interleaved) == world4.run(reference_interleaved)


def test_torch_tensors_come_back_as_tensors(world2):
    out = world2.run(torch_tensors)
    assert out[0][0] == [float(2 * i + 1) for i in range(6)]
    assert out[0][2] == "Tensor" and len(out[0][1]) == 12


def test_an_error_in_a_background_op_surfaces_at_wait_and_at_the_next_call(world2):
    assert world2.run(background_error)[0] == "PeerGone then PeerGone"


def test_an_error_never_waited_for_still_fails_the_run(world2):
    with pytest.raises(RankError) as info:
        world2.run(never_waited)
    assert info.value.rank == 0 and info.value.exc_type == "PeerGone"


def test_a_wrong_argument_raises_at_the_call_not_at_wait(world2):
    assert "median" in world2.run(bad_argument)[0]


def returns_with_ops_in_flight(comm):
    """Rank 1 returns while its queued ops still wait (a recv from rank 0, then a send to rank
    2): until they have run it has not returned, and rank 2's recv from it must not fail."""
    import time

    me = comm.rank
    if me == 0:
        time.sleep(0.5)  # rank 1 has returned by now, its recv still waiting for this send
        comm.send(np.arange(3.0), 1)
    elif me == 1:
        comm.recv(0, async_op=True)
        comm.send(np.arange(3.0) + 1, 2, async_op=True)
        time.sleep(0.1)  # the communication thread is inside the recv when the function returns
    else:
        return comm.recv(1).tolist()
    return None


@pytest.mark.parametrize("backend", ["local", "torch"])
def test_a_rank_with_async_ops_in_flight_has_not_returned(backend):
    from parlab.comm import launch

    assert launch(returns_with_ops_in_flight, 3, backend=backend, timeout=30)[2] == [1.0, 2.0, 3.0]


def test_a_rank_with_async_ops_in_flight_has_not_returned_on_a_warm_world():
    from parlab.comm import World

    with World(3, backend="torch", timeout=30) as world:
        assert world.run(returns_with_ops_in_flight)[2] == [1.0, 2.0, 3.0]


def reset_behind_async_ops(comm) -> dict:
    """reset_traffic() after async calls: their bytes are counted before the reset, never after."""
    works = [comm.all_reduce(np.ones(BIG, np.float32), async_op=True) for _ in range(4)]
    comm.reset_traffic()
    after = comm.traffic()
    for w in works:
        w.wait()
    return after


def test_reset_traffic_waits_for_the_async_ops_issued_before_it(world2):
    assert world2.run(reset_behind_async_ops) == [{}, {}]


def threads_after_async(comm) -> int:
    import threading

    comm.all_reduce(np.ones(3), async_op=True).wait()
    return threading.active_count()


def test_a_warm_world_does_not_keep_a_communication_thread_per_run(world2):
    counts = [world2.run(threads_after_async) for _ in range(3)]
    assert counts[0] == counts[1] == counts[2]
