"""Every way a launch can fail ends quickly, says which rank did what, and leaves nothing behind.

(The suite's conftest also checks, after this module, that no child process and no parlab
shared-memory segment is left.)
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
import time

import cloudpickle
import numpy as np
import pytest

from conftest import live_children, parlab_segments
from parlab.comm import CollectiveMismatch, CommTimeout, PeerGone, RankDied, RankError, launch, shm

cloudpickle.register_pickle_by_value(sys.modules[__name__])
launch_module = sys.modules["parlab.comm.launch"]  # the package's `launch` is the function
BACKENDS = ["local", "torch"]
# A failure is reported long before a hang would be: the launches below wait HANG seconds in a
# call before they time out, and must report within QUICK, a bound so generous that only a hang
# exceeds it (a busy laptop's torch ranks take up to tens of seconds to import torch and meet).
HANG = 600.0
QUICK = {"local": 120.0, "torch": 200.0}


def raises_on_rank_2(comm):
    if comm.rank == 2:
        raise ValueError("bad batch on rank 2")
    comm.barrier()  # the others wait for it


def exits_on_rank_1(comm):
    if comm.rank == 1:
        os._exit(3)
    comm.all_reduce(np.ones(3))


def killed_on_rank_1(comm):
    if comm.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    comm.all_reduce(np.ones(3))


def recv_with_no_sender(comm):
    if comm.rank == 0:
        comm.recv(1)
    comm.barrier()


def two_recvs_and_a_barrier(comm):
    if comm.rank < 2:
        comm.recv(1 - comm.rank)  # ranks 0 and 1 wait for each other: nobody sends
    comm.barrier()


def different_collectives(comm):
    x = np.ones(4)
    if comm.rank == 0:
        comm.all_reduce(x)
    else:
        comm.all_gather(x)


def different_shapes(comm):
    comm.all_reduce(np.ones((2, 3)) if comm.rank == 0 else np.ones((3, 2)))


def different_dtypes(comm):
    comm.all_gather(np.ones(4, np.float32 if comm.rank else np.float64))


def collective_vs_recv(comm):
    if comm.rank == 0:
        comm.recv(1)
    else:
        comm.broadcast(np.ones(2), src=1)


def sleeps(comm):
    time.sleep(HANG)


def nothing_left():
    assert live_children() == []


def timed(fn, *args, **kwargs):
    t = time.perf_counter()
    try:
        fn(*args, **kwargs)
    finally:
        timed.elapsed = time.perf_counter() - t


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_raises_in_the_caller_with_rank_and_traceback(backend):
    with pytest.raises(RankError) as err:
        timed(launch, raises_on_rank_2, 3, backend=backend, timeout=HANG)
    assert timed.elapsed < QUICK[backend]
    e = err.value
    assert e.rank == 2 and e.exc_type == "ValueError"
    assert "rank 2 raised ValueError: bad batch on rank 2" in str(e)
    assert 'raise ValueError("bad batch on rank 2")' in str(e)  # the worker's traceback, its line
    assert isinstance(e.__cause__, ValueError)
    nothing_left()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, how", [(exits_on_rank_1, "exited with code 3"),
                                      (killed_on_rank_1, "was killed by SIGKILL")])
def test_a_rank_that_dies_is_detected(backend, fn, how):
    with pytest.raises(RankDied) as err:
        timed(launch, fn, 3, backend=backend, timeout=HANG)
    assert timed.elapsed < QUICK[backend]
    assert err.value.rank == 1 and how in str(err.value)
    assert "while running its own code" in str(err.value)
    nothing_left()


def test_a_deadlock_times_out_naming_the_stuck_ranks_and_calls():
    with pytest.raises(CommTimeout) as err:
        timed(launch, recv_with_no_sender, 3, backend="local", timeout=1.5)
    assert timed.elapsed < QUICK["local"] + 1.5
    text = str(err.value)
    assert "rank 0: in send/recv, waiting for a message from rank 1" in text
    assert "rank 1: in barrier #0" in text and "rank 2: in barrier #0" in text
    assert err.value.stuck == [0, 1, 2]
    nothing_left()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deadlock_no_rank_can_see_times_out_naming_every_rank_and_call(backend):
    with pytest.raises(CommTimeout) as err:
        timed(launch, two_recvs_and_a_barrier, 3, backend=backend, timeout=1.5)
    assert timed.elapsed < QUICK[backend] + 1.5
    text = str(err.value)
    assert "rank 0: in send/recv, waiting for a message from rank 1" in text
    assert "rank 1: in send/recv, waiting for a message from rank 0" in text
    assert "rank 2: in barrier #0" in text
    assert err.value.stuck == [0, 1, 2]
    nothing_left()


def test_on_torch_a_recv_from_a_rank_waiting_in_a_collective_fails_at_once_naming_both():
    # the torch backend's ledger sees rank 1 in a collective rank 0 never entered: no need to
    # wait for the timeout (the local backend's barrier sends rank 0 nothing: it times out)
    with pytest.raises(RankError, match=r"rank 0 is in point-to-point send/recv but rank 1 is in "
                                        r"barrier #0") as err:
        timed(launch, recv_with_no_sender, 3, backend="torch", timeout=HANG)
    assert timed.elapsed < QUICK["torch"]
    assert err.value.exc_type == "CollectiveMismatch"
    nothing_left()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_collective_against_a_recv_fails_never_hangs(backend):
    # local: the broadcast's message reaches the recv, whose signature check refuses it;
    # torch: the ledger shows rank 1 in a collective that rank 0 has not entered (issue 8 item 8)
    with pytest.raises(RankError, match=r"rank 0 is in point-to-point send/recv but rank 1 is in "
                                        r"broadcast #0") as err:
        timed(launch, collective_vs_recv, 2, backend=backend, timeout=HANG)
    assert timed.elapsed < QUICK[backend]
    assert err.value.rank == 0 and err.value.exc_type == "CollectiveMismatch"
    nothing_left()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, words", [
    (different_collectives, r"is in all_(gather|reduce) #0 .* but rank \d is in all_(reduce|gather) #0"),
    (different_shapes, r"shape \((2, 3|3, 2)\).* but rank \d is in all_reduce #0 \(shape \((3, 2|2, 3)\)"),
    (different_dtypes, r"float(32|64).* but rank \d is in all_gather #0 \(shape \(4,\), float(64|32)"),
])
def test_mismatched_calls_are_an_error_never_a_wrong_answer(backend, fn, words):
    with pytest.raises(RankError, match=words) as err:
        timed(launch, fn, 3, backend=backend, timeout=HANG)
    assert timed.elapsed < QUICK[backend]
    assert err.value.exc_type == "CollectiveMismatch"
    assert isinstance(err.value.__cause__, CollectiveMismatch)
    nothing_left()


@pytest.mark.parametrize("backend", BACKENDS)
def test_interrupting_the_caller_stops_every_worker(backend, ctrl_c_delivered):
    timer = threading.Timer(1.0 if backend == "local" else 6.0, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        timed(launch, sleeps, 4, backend=backend, timeout=HANG)
    timer.join()
    assert timed.elapsed < 1.0 + QUICK[backend]  # the ranks sleep for HANG s
    nothing_left()


def naps(comm):
    time.sleep(2.0)
    return comm.rank


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_caller_that_ignores_sigint_is_not_interrupted(backend):
    """Ignored stays ignored: the launch installs no handler of its own, and a SIGINT during it
    changes nothing (a notebook kernel or a service may run with SIGINT ignored)."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        assert launch(naps, 2, backend=backend, timeout=HANG) == [0, 1]
        timer.join()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)
    nothing_left()


def exchange(comm, tag):
    """Each launch reduces its own data; two at once must never see each other's."""
    x = np.full(200_000, tag + comm.rank, np.float64)  # big enough to go through the rings
    out = comm.all_reduce(x, algorithm="ring")
    return float(out[0]), float(out[-1])


def test_two_launches_at_once_never_see_each_others_data():
    results = {}

    def run(tag):
        results[tag] = launch(exchange, 3, tag)

    threads = [threading.Thread(target=run, args=(tag,)) for tag in (0, 1000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results[0] == [(3.0, 3.0)] * 3
    assert results[1000] == [(3003.0, 3003.0)] * 3
    nothing_left()


def lists_shared_memory(comm):
    return sorted(p for p in os.listdir("/dev/shm") if p.startswith("parlab"))


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm here")
def test_the_shared_arena_has_no_name_to_leak():
    before = parlab_segments()
    seen = launch(lists_shared_memory, 2)
    assert all(set(s) <= before for s in seen)  # nothing named while the launch runs
    assert parlab_segments() == before


def disagree_on_root(comm):
    return comm.broadcast(np.array([comm.rank]), src=comm.rank)  # each rank thinks it is the root


@pytest.mark.parametrize("backend", ["local", "torch"])
def test_ranks_that_disagree_on_the_root_fail_instead_of_each_keeping_its_own_data(backend):
    with pytest.raises(RankError, match=r"broadcast #0 \(shape \(1,\), int64, root \d") as err:
        launch(disagree_on_root, 3, backend=backend)
    assert err.value.exc_type == "CollectiveMismatch"  # the message left over names the mismatch
    nothing_left()


def send_without_recv(comm):
    if comm.rank == 0:
        comm.send(np.ones(3), 1)


def recv_from_a_rank_that_returned(comm):
    if comm.rank == 0:
        comm.recv(2)


def test_a_send_nobody_receives_is_an_error_when_the_receiver_returns():
    with pytest.raises(RankError, match=r"rank 1 returned from its function, but rank 0 had sent it 1 "
                                        r"message\(s\) it never received, the first from point-to-point"):
        launch(send_without_recv, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_send_nobody_receives_is_the_same_error_on_both_backends(backend):
    # issue 8 item 8: torch used to drop the message silently
    with pytest.raises(RankError, match=r"UnreceivedMessage: rank 1 returned from its function, but "
                                        r"rank 0 had sent it 1 message\(s\) it never received") as err:
        timed(launch, send_without_recv, 3, backend=backend, timeout=HANG)
    assert timed.elapsed < QUICK[backend]
    assert err.value.rank == 1
    nothing_left()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_recv_from_a_rank_that_returned_fails_at_once(backend):
    # issue 8 item 8: torch gave gloo's raw "Connection closed by peer", or hung
    with pytest.raises(RankError, match=r"PeerGone: rank 2 returned from its function .* while rank 0 "
                                        r"waited") as err:
        timed(launch, recv_from_a_rank_that_returned, 3, backend=backend, timeout=HANG)
    assert timed.elapsed < QUICK[backend]
    assert err.value.rank == 0 and err.value.__cause__.peer in (2, None)
    nothing_left()


def all_but_one_all_reduce(comm, algorithm):
    if comm.rank != 1:
        comm.all_reduce(np.ones(3), algorithm=algorithm)


@pytest.mark.parametrize("backend, algorithm", [("local", None), ("local", "ring"),
                                                ("torch", None), ("torch", "ring")])
def test_a_collective_a_rank_returned_without_calling_fails_at_once(backend, algorithm):
    # issue 8 item 8: the rank that returned is named, whichever side sees it first
    with pytest.raises(RankError, match=r"rank 1 returned from its function") as err:
        timed(launch, all_but_one_all_reduce, 3, algorithm, backend=backend, timeout=HANG)
    assert timed.elapsed < QUICK[backend]
    assert err.value.exc_type in ("PeerGone", "UnreceivedMessage")
    nothing_left()


def slow_rank(comm):
    comm.barrier()
    if comm.rank == 0:
        time.sleep(2.5)  # the others have returned and wait for rank 0: not a deadlock
    return comm.rank


def test_ranks_that_returned_may_wait_for_a_slow_one_longer_than_the_timeout():
    # the timeout bounds one communication call; ranks done with their function are not in one
    assert launch(slow_rank, 3, timeout=1.0) == [0, 1, 2]


# ---------------------------------------------------------------- which failure is blamed (item 7)
GLOO_RESET = ("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
              "[127.0.0.1]:64705: Connection reset by peer. This is typically caused by a remote "
              "worker hanging or bugs in the application.")


def gloo_reset(rank):
    return RankError(f"rank {rank} raised RuntimeError: {GLOO_RESET}\n\nTraceback ...", rank, "RuntimeError")


def peer_gone(rank, peer):
    err = RankError(f"rank {rank} raised PeerGone: rank {peer} returned ...", rank, "PeerGone")
    err.__cause__ = PeerGone(f"rank {peer} returned", peer=peer)
    return err


@pytest.fixture
def verdict():
    """_Launch._verdict on a 3-rank launch whose status table says everyone is running; the
    set ``ended`` stands for the worker processes that have ended."""
    run = launch_module._Launch(3, "torch", 10.0, 0, False)
    fd = shm.create_fd(shm.arena_size(3, 0))
    run.arena = shm.Arena(fd, 3, 0)
    run.arena.status[:, shm.STATE] = shm.RUNNING
    ended: set[int] = set()
    run._ended = lambda r: r in ended

    def decide(results, failures, waited=0.0):
        lost_since = [time.monotonic() - waited] if waited else []
        return run._verdict(results, failures, lost_since)

    decide.run, decide.ended = run, ended
    yield decide
    run.arena.close()
    os.close(fd)


def test_a_death_wins_over_the_connection_errors_it_caused_whatever_came_first(verdict):
    died = RankDied("rank 1 was killed by SIGKILL while in all_reduce #3", 1, -9)
    assert verdict({}, {0: gloo_reset(0), 2: gloo_reset(2), 1: died}) is died
    assert verdict({}, {1: died, 0: gloo_reset(0)}) is died


def test_a_connection_error_alone_waits_for_the_death_that_explains_it(verdict):
    lost = gloo_reset(0)
    assert verdict({}, {0: lost}) is None  # just came: the death may be on its way
    verdict.ended.add(1)  # a worker has ended: its EOF is coming, keep waiting for it
    assert verdict({}, {0: lost}, waited=1.0) is None
    assert verdict({}, {0: lost}, waited=launch_module.LOST_GRACE + 0.1) is lost  # bounded
    verdict.ended.clear()  # nobody ended: the connection error is the error itself
    assert verdict({}, {0: lost}, waited=launch_module.LOST_SETTLE + 0.05) is lost


def test_a_genuine_error_wins_over_connection_errors(verdict):
    genuine = RankError("rank 2 raised ValueError: bad batch", 2, "ValueError")
    assert verdict({}, {0: gloo_reset(0), 2: genuine}) is genuine


def test_a_recv_from_a_rank_that_returned_is_the_error_at_once(verdict):
    gone = peer_gone(0, 2)
    assert verdict({}, {0: gone}) is None  # rank 2 still running: it may yet fail or die
    assert verdict({2: "its result"}, {0: gone}) is gone
    verdict.run.arena.status[2, shm.STATE] = shm.EXITING  # returned, waiting for the others
    assert verdict({}, {0: gone}) is gone


def test_a_death_after_its_result_is_no_failure_unless_it_broke_a_connection(verdict):
    died = RankDied("rank 1 was killed by SIGKILL after returning its result", 1, -9)
    assert verdict({1: 1}, {1: died}) is None
    assert verdict({1: 1}, {1: died, 0: gloo_reset(0)}) is died
