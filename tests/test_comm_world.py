"""``World``: warm ranks run many functions; failures raise as in launch and the world recovers."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import cloudpickle
import numpy as np
import pytest

from conftest import has_ended
from parlab.comm import (
    CollectiveMismatch,
    CommTimeout,
    PeerGone,
    RankDied,
    RankError,
    UnreceivedMessage,
    World,
    launch,
)

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def pid_and_sum(comm, k):
    x = np.full(1000, comm.rank + k, np.float32)
    y = comm.all_reduce(x)
    return os.getpid(), float(y[0]), comm.traffic()["all_reduce"].calls


def raises(comm):
    if comm.rank == 1:
        raise ValueError("boom on purpose")
    comm.barrier()


def dies(comm):
    if comm.rank == 0:
        os._exit(3)
    comm.barrier()


def recv_from_returned(comm):
    if comm.rank == 0:
        comm.recv(1)


def unreceived(comm):
    if comm.rank == 0:
        comm.send(np.ones(3), 1)


def mismatched(comm):
    if comm.rank == 0:
        comm.all_reduce(np.ones(4))
    else:
        comm.all_gather(np.ones(4))


def stuck(comm):
    if comm.rank == 0:
        comm.recv(1)
    else:
        comm.recv(0)


def groups_and_counters(comm):
    before = comm.traffic()
    g = comm.new_group([0, 1])
    y = g.all_reduce(np.ones(2)) if g is not None else None
    return sorted(before), None if y is None else y.tolist(), comm._seq, comm._groups


def test_runs_reuse_the_same_processes_and_return_per_rank_results(world2):
    n = world2.world_size
    first = world2.run(pid_and_sum, 1)
    second = world2.run(pid_and_sum, 2)
    assert [r[1] for r in first] == [float(sum(range(n)) + n)] * n
    assert [r[1] for r in second] == [float(sum(range(n)) + 2 * n)] * n
    assert [r[0] for r in first] == [r[0] for r in second]  # the same processes
    assert all(r[2] == 1 for r in second)  # counters start anew each run


def test_each_run_gets_a_clean_communicator(world2):
    for _ in range(2):  # sub-groups of the earlier run are gone; no traffic, seq 0 at the start
        out = world2.run(groups_and_counters)
        assert [o[0] for o in out] == [[]] * world2.world_size
        assert out[0][1] == [2.0, 2.0]
        assert out[0][3] == 1


@pytest.mark.parametrize("fn, error", [
    (raises, RankError), (dies, RankDied), (recv_from_returned, PeerGone),
    (unreceived, UnreceivedMessage), (mismatched, CollectiveMismatch),
])
def test_a_failing_run_raises_as_launch_does_and_the_next_run_works(world2, fn, error):
    starts = world2.starts
    with pytest.raises(RankDied if error is RankDied else RankError) as info:
        world2.run(fn)
    if error not in (RankError, RankDied):  # the rank's own error, by name and as the cause
        assert info.value.exc_type == error.__name__
        assert isinstance(info.value.__cause__, error)
    if error is RankError:
        assert info.value.rank == 1 and "boom on purpose" in str(info.value)
        assert "raise ValueError" in str(info.value)  # the rank's traceback, with its source
    if error is RankDied:
        assert info.value.rank == 0
    after = world2.run(pid_and_sum, 0)
    assert [r[1] for r in after] == [float(sum(range(world2.world_size)))] * world2.world_size
    assert world2.starts == starts + 1  # the whole set was replaced


def test_a_deadlock_times_out_and_the_world_recovers():
    with World(2, timeout=1.0) as world:
        with pytest.raises(CommTimeout):
            world.run(stuck)
        assert [r[1] for r in world.run(pid_and_sum, 0)] == [1.0, 1.0]


def test_a_world_runs_functions_defined_in_the_caller_and_prints_their_output(capfd):
    def cell_function(comm, word):  # as a notebook cell defines it: by value
        print(f"hello {word} from {comm.rank}")
        return comm.rank * 10

    with World(2) as world:
        assert world.run(cell_function, "there") == [0, 10]
    out = capfd.readouterr().out
    assert "[rank 0] hello there from 0" in out and "[rank 1] hello there from 1" in out


def test_close_ends_every_rank_and_a_closed_world_refuses_to_run():
    world = World(2)
    pids = [r[0] for r in world.run(pid_and_sum, 0)]
    world.close()
    world.close()  # idempotent
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with pytest.raises(RuntimeError, match="closed"):
        world.run(pid_and_sum, 0)


def test_a_forgotten_world_is_closed_when_collected():
    world = World(2)
    pids = [r[0] for r in world.run(pid_and_sum, 0)]
    del world
    import gc

    gc.collect()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def sleeps(comm):
    time.sleep(30)


def test_ctrl_c_during_a_run_kills_the_ranks_and_the_world_stays_usable(ctrl_c_delivered):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGINT reaches the main thread only")
    with World(2) as world:
        pids = [r[0] for r in world.run(pid_and_sum, 0)]
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            world.run(sleeps)
        timer.join()
        for pid in pids:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        assert [r[1] for r in world.run(pid_and_sum, 0)] == [1.0, 1.0]


def test_bad_arguments_are_refused_before_anything_starts():
    with pytest.raises(ValueError, match="world_size must be an integer in 1..256"):
        World(0)
    with pytest.raises(ValueError, match="unknown backend 'mpi'"):
        World(2, backend="mpi")
    with World(2) as world:
        with pytest.raises(TypeError, match="fn must be a function"):
            world.run(3)
        assert world.starts == 0


def test_launch_still_works_beside_a_world(world2):
    assert launch(pid_and_sum, 2, 0)[0][1] == 1.0
    assert world2.run(pid_and_sum, 0)[0][1] == float(sum(range(world2.world_size)))


# -- one function at a time; a rank lost between runs (issue 18 items 7 and 10) -----------------
def waits_for(comm, path):
    if comm.rank == 0:
        with open(path, "rb") as fifo:  # until the test writes
            return fifo.read(1)
    return b""


def test_a_second_thread_is_refused_at_once_while_a_run_is_in_progress(world2, tmp_path):
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    out = {}
    first = threading.Thread(target=lambda: out.update(a=world2.run(waits_for, str(fifo))), name="cell-A")
    first.start()
    with open(fifo, "wb") as go:  # opens once rank 0 has opened it to read: the first run is under way
        with pytest.raises(RuntimeError, match="already running a function .*thread 'cell-A'.*one function at a time"):
            world2.run(pid_and_sum, 0)
        with pytest.raises(RuntimeError, match="already running a function"):
            world2.start()
        go.write(b"x")
    first.join()
    assert out["a"] == [b"x", b""]  # the first run was not disturbed
    assert [r[1] for r in world2.run(pid_and_sum, 0)] == [1.0, 1.0]


def exits_when_told(comm, path):
    if comm.rank == 1:  # a thread the function leaves behind ends the rank after the run
        def later():
            with open(path, "rb") as fifo:
                fifo.read(1)
            os._exit(5)

        threading.Thread(target=later, daemon=True).start()
    return os.getpid()


@pytest.mark.parametrize("how", ["killed", "exited"])
def test_a_rank_lost_between_runs_is_named_and_the_next_run_gets_fresh_ranks(world2, tmp_path, how):
    fifo = tmp_path / "end"
    os.mkfifo(fifo)
    pids = world2.run(exits_when_told, str(fifo))
    runs, starts = world2.runs, world2.starts
    if how == "killed":
        os.kill(pids[1], signal.SIGKILL)  # (opening the fifo now would wait for a reader forever)
    else:
        with open(fifo, "wb") as end:  # opens once rank 1's thread reads it: then it exits
            end.write(b"x")
    assert has_ended(pids[1]), f"rank 1 (pid {pids[1]}) did not end"  # (not reaped: World does)
    died = "was killed by SIGKILL" if how == "killed" else "exited with code 5"
    with pytest.warns(RuntimeWarning, match=rf"rank 1 \(pid {pids[1]}\) {died} between runs: after run "
                                            rf"{runs} ended.*replaced the whole set"):
        after = world2.run(pid_and_sum, 0)
    assert [r[1] for r in after] == [1.0, 1.0]
    assert world2.starts == starts + 1 and not set(pids) & {r[0] for r in after}
