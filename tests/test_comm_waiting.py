"""How a local rank waits: spin only where it pays, sleep on a futex, and a peer still starting
is no deadlock of the ranks that wait for it."""

from __future__ import annotations

import mmap
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from parlab.comm import CommTimeout, shm
from parlab.comm.waiting import (
    HAVE_FUTEX,
    REST,
    WINDOW,
    WaitPolicy,
    futex_wait,
    futex_wake,
    futex_word,
)

launch_module = sys.modules["parlab.comm.launch"]


def idle():
    return 1  # a machine where only the waiting rank runs


def test_ranks_that_outnumber_the_cores_never_spin():
    assert WaitPolicy(4, spin_s=1e-4, cores=2, runnable=idle).budget() == 0.0
    assert WaitPolicy(4, spin_s=1e-4, cores=2, runnable=idle).oversubscribed
    assert WaitPolicy(2, spin_s=1e-4, cores=2, runnable=idle).budget() == 1e-4


def test_no_spin_while_other_tasks_wait_for_a_core():
    """Two ranks on two cores, but a browser and an IDE busy too: a spin would hold a core
    that a runnable task (maybe the peer it waits for) needs."""
    busy = iter([5, 2, 3, 1])
    policy = WaitPolicy(2, spin_s=1e-4, cores=2, runnable=lambda: next(busy))
    assert [policy.budget() for _ in range(4)] == [0.0, 1e-4, 0.0, 1e-4]
    assert WaitPolicy(2, spin_s=1e-4, cores=2, runnable=lambda: None).budget() == 1e-4  # unknown


def test_the_communication_thread_spins_only_while_its_caller_waits_for_it():
    """Overlap on CPU ranks: while the caller computes (backward, with DDP's buckets in flight)
    a spin on the communication thread would take the caller's core; while the caller waits
    in ``wait()``, the core is free to spin on."""
    from parlab.comm.progress import Progress

    policy = WaitPolicy(2, spin_s=1e-4, cores=2, runnable=idle)
    progress, go, seen = Progress(), threading.Event(), {}

    def op(name):
        def call():
            if name == "waited":
                while not (waiting := progress_waits()):
                    time.sleep(1e-3)  # until the caller is inside wait()
                seen[name] = (waiting, policy.budget())
            else:
                go.wait()
                seen[name] = (progress_waits(), policy.budget())
        return call

    from parlab.comm import progress as progress_module

    def progress_waits():
        return progress_module._waiting[0] > 0

    computing = progress.submit(op("computing"), "computing")
    go.set()
    while not computing.is_completed():
        time.sleep(1e-3)  # the caller busy elsewhere, not in wait()
    progress.submit(op("waited"), "waited").wait()
    progress.close()
    assert seen["computing"] == (False, 0.0)
    assert seen["waited"] == (True, 1e-4)
    assert policy.budget() == 1e-4  # the caller's own thread spins as before


def test_the_machine_tells_how_many_tasks_are_runnable():
    from parlab.comm.waiting import runnable_tasks

    n = runnable_tasks()
    assert n is None or n >= 1  # at least the caller itself, where Linux says


def test_spinning_stops_for_a_while_when_it_mostly_misses_and_then_tries_again():
    policy = WaitPolicy(2, spin_s=1e-4, cores=8, runnable=idle)
    for i in range(WINDOW):
        policy.spun(hit=i % 8 == 0)  # 1 in 8 spins saw the event: a busy machine
    assert [policy.budget() for _ in range(REST)] == [0.0] * REST
    assert policy.budget() == 1e-4  # probes again


def test_spinning_goes_on_while_it_pays():
    policy = WaitPolicy(2, spin_s=1e-4, cores=8, runnable=idle)
    for i in range(3 * WINDOW):
        policy.spun(hit=i % 2 == 0)
    assert policy.budget() == 1e-4


@pytest.mark.skipif(not HAVE_FUTEX, reason="no futex on this platform")
def test_a_futex_sleeper_wakes_when_the_word_changes_and_never_misses_a_change():
    area = mmap.mmap(-1, mmap.PAGESIZE)  # shared memory, as the arena is
    counter = np.frombuffer(area, np.int64, count=1)
    word = futex_word(counter)
    woke = threading.Event()

    def sleeper():
        while int(counter[0]) < 1:
            futex_wait(word, int(counter[0]), 60.0)  # a lost wake-up would sleep 60 s
        woke.set()

    t = threading.Thread(target=sleeper)
    t.start()
    counter[0] = 1
    futex_wake(word)
    assert woke.wait(30), "the sleeper was not woken"
    t.join()
    start = time.monotonic()
    futex_wait(word, 0, 60.0)  # the word no longer holds 0: returns at once
    assert time.monotonic() - start < 30


@pytest.fixture
def watchdog(monkeypatch):
    """A 2-rank launch's watchdog over a status table we write, on a clock we set."""
    run = launch_module._Launch(2, "local", 1.0, 0, False)
    run.arena = SimpleNamespace(status=np.zeros((2, shm.STATUS_FIELDS)))
    run.procs = [SimpleNamespace(poll=lambda: None)] * 2  # both alive
    clock = [1000.0]
    monkeypatch.setattr(launch_module.time, "monotonic", lambda: clock[0])
    return run, run.arena.status, clock


def test_a_peer_still_starting_is_no_deadlock_of_the_rank_waiting_for_it(watchdog):
    run, status, clock = watchdog
    status[0, shm.STATE], status[0, shm.T_PROGRESS] = shm.STARTING, 1000.0  # importing torch
    status[1, shm.STATE], status[1, shm.T_PROGRESS] = shm.WAITING, 1000.0  # in a recv from 0
    clock[0] = 1050.0  # 50 timeouts later, rank 0 still starting
    run._watchdog({})
    status[0, shm.STATE], status[0, shm.T_PROGRESS] = shm.IN_OP, 1050.0  # started at last
    run._watchdog({})
    clock[0] = 1050.9  # rank 1's clock started when rank 0 did: under one timeout
    run._watchdog({})
    clock[0] = 1051.2
    with pytest.raises(CommTimeout, match="ranks 0, 1 made no progress for 1 s"):
        run._watchdog({})


def test_a_rank_that_never_starts_is_reported_after_the_startup_limit(watchdog):
    run, status, clock = watchdog
    status[0, shm.STATE], status[0, shm.T_PROGRESS] = shm.STARTING, 1000.0
    status[1, shm.STATE], status[1, shm.T_PROGRESS] = shm.WAITING, 1000.0
    clock[0] = 1000.0 + launch_module.STARTUP_LIMIT - 1
    run._watchdog({})
    clock[0] = 1000.0 + launch_module.STARTUP_LIMIT + 1
    with pytest.raises(CommTimeout):
        run._watchdog({})
