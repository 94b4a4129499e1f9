"""A launch leaves nothing behind: Ctrl-C at any moment, helper processes, kept exceptions, a killed caller.

A notebook kernel survives all of these and runs for hours, so whatever one launch made
(processes, zombies, the memfd arena and its mapping, the torch store directory) must be gone
when the launch returns or raises, whatever interrupted it.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

from parlab.comm import CommTimeout, RankError, launch

cloudpickle.register_pickle_by_value(sys.modules[__name__])
ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ["local", "torch"]


def alive(pid: int) -> bool:
    """True if the process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pids, limit: float = 15.0) -> list[int]:
    """The pids still alive after waiting up to ``limit`` seconds for them to end."""
    deadline = time.monotonic() + limit
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def memfd_mapped_bytes() -> int:
    """Bytes of parlab memfd arenas mapped into this process."""
    total = 0
    for line in Path("/proc/self/maps").read_text().splitlines():
        if "memfd:parlab" in line:
            lo, hi = line.split()[0].split("-")
            total += int(hi, 16) - int(lo, 16)
    return total


def start_script(tmp_path: Path, body: str, *args: str, env: dict | None = None) -> subprocess.Popen:
    script = tmp_path / "caller.py"
    script.write_text(textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.Popen([sys.executable, str(script), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=open(tmp_path / "caller.err", "wb"),
                            env=env, cwd=tmp_path, bufsize=0)


def read_line(proc: subprocess.Popen, limit: float, tmp_path: Path) -> str:
    """One line of the caller's stdout, or a failure showing its stderr."""
    buf = b""
    deadline = time.monotonic() + limit
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            pytest.fail(f"the caller said nothing for {limit} s; its stderr:\n"
                        + (tmp_path / "caller.err").read_text()[-3000:])
        chunk = os.read(proc.stdout.fileno(), 1)
        if not chunk:
            pytest.fail("the caller ended; its stderr:\n" + (tmp_path / "caller.err").read_text()[-3000:])
        buf += chunk
    return buf.decode().strip()


# ---------------------------------------------------------------------------- Ctrl-C (item 3)
INTERRUPTED_CALLER = """
    import signal

    # Ctrl-C is taken only while launches run: one pressed later (the second of two) stays
    # pending until the next run starts, so it never eats a command that is being answered.
    # Blocked before any import: threads started later (OpenBLAS's) inherit the mask, so the
    # signal can only reach the main thread, and only while it has SIGINT unblocked.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    import json, os, sys
    from pathlib import Path
    from parlab.comm import launch, zygote

    # what a terminal gives an interactive process, whatever this one inherited (a shell's
    # background job, nohup and some CI runners hand SIGINT down ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def work(comm):
        comm.barrier()
        return comm.rank

    def leftovers():
        kids = []
        for task in Path("/proc/self/task").iterdir():
            kids += (task / "children").read_text().split()  # zombies are listed too
        kids = [k for k in kids if int(k) not in zygote.pids()]  # it stays, to fork the next ranks
        fds = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                fds.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                pass
        maps = [line.split()[-2] for line in open("/proc/self/maps") if "memfd:" in line]
        return {"children": kids, "memfd": [f for f in fds if "memfd:" in f], "maps": maps}

    def launches():  # again and again until a Ctrl-C ends it, as a cell that a learner stops
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            while True:
                launch(work, 3, backend=sys.argv[1])
        except KeyboardInterrupt:
            pass
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    print("ready", flush=True)
    while True:  # like a notebook kernel: a KeyboardInterrupt ends the cell, not the process
        try:
            line = sys.stdin.readline()
            if not line:
                break
            if line == "run\\n":
                print("running", flush=True)
                launches()
            else:
                print(json.dumps(leftovers()), flush=True)
        except KeyboardInterrupt:  # taken just as a run ended: nothing was being answered
            pass
"""
# seconds: a rank of the torch backend takes 1-3 s to import torch and meet the others
TRIALS = {"local": (12, 0.4), "torch": (8, 2.0)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_ctrl_c_once_or_twice_at_any_moment_leaves_no_child_and_no_memfd(tmp_path, backend):
    """Half the interrupts land in the first 30 ms (while the ranks are being started), the
    rest anywhere in a launch; every other trial presses Ctrl-C twice within 20 ms."""
    trials, spread = TRIALS[backend]
    rng = random.Random(8)
    caller = start_script(tmp_path, INTERRUPTED_CALLER, backend)
    try:
        assert read_line(caller, 60, tmp_path) == "ready"
        for trial in range(trials):
            caller.stdin.write(b"run\n")
            assert read_line(caller, 30, tmp_path) == "running"
            delay = rng.uniform(0, 0.03) if trial % 4 < 2 else rng.uniform(0, spread)
            twice = trial % 2 == 1
            time.sleep(delay)
            caller.send_signal(signal.SIGINT)
            if twice:
                time.sleep(rng.uniform(0, 0.02))
                caller.send_signal(signal.SIGINT)
            caller.stdin.write(b"check\n")  # answered once the launch has cleaned up
            left = json.loads(read_line(caller, 30, tmp_path))
            assert left == {"children": [], "memfd": [], "maps": []}, (
                f"trial {trial}: Ctrl-C {'twice' if twice else 'once'} {delay * 1000:.0f} ms into "
                f"the launch left {left}")
    finally:
        caller.kill()
        caller.wait()
        caller.stdin.close()
        caller.stdout.close()


IGNORING_CALLER = """
    import signal, sys
    from parlab.comm import launch

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a service, or a job started with nohup

    def work(comm):
        comm.barrier()
        return comm.rank

    print("ready", flush=True)
    for line in sys.stdin:
        print(launch(work, 2, backend=sys.argv[1]), signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
              flush=True)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_caller_that_ignores_ctrl_c_keeps_it_ignored_and_its_launches_finish(tmp_path, backend):
    """SIGINT ignored by the process the runtime runs in (inherited SIG_IGN): the launch
    installs no handler of its own, a Ctrl-C changes nothing, every launch returns its result."""
    caller = start_script(tmp_path, IGNORING_CALLER, backend)
    try:
        assert read_line(caller, 60, tmp_path) == "ready"
        caller.stdin.write(b"run\n")
        caller.send_signal(signal.SIGINT)
        assert read_line(caller, 300, tmp_path) == "[0, 1] True"
        assert caller.poll() is None
    finally:
        caller.kill()
        caller.wait()
        caller.stdin.close()
        caller.stdout.close()


# ---------------------------------------------------------------------------- helpers (item 4)
def starts_helpers(comm, secs, fail):
    """A helper in the worker's process group (it also holds the worker's stdout and stderr),
    one in a session of its own, which leaves the group, and a shell's orphan."""
    inside = subprocess.Popen(["sleep", secs])
    detached = subprocess.Popen(["sleep", secs], start_new_session=True)
    os.system(f"sleep {secs} &")
    comm.barrier()
    if fail:
        raise RuntimeError("after starting helpers")
    return inside.pid, detached.pid


def sleeping(secs: str) -> list[int]:
    """Live ``sleep secs`` processes anywhere on the machine."""
    found = []
    for p in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd[:2] == [b"sleep", secs.encode()] and alive(int(p)):
            found.append(int(p))
    return found


@pytest.mark.parametrize("backend, fail", [("local", False), ("local", True), ("torch", False)])
def test_a_rank_s_helper_processes_neither_block_the_launch_nor_outlive_it(backend, fail):
    secs = f"60.{random.randrange(10**6):06d}"  # names this test's helpers
    t = time.monotonic()
    if fail:
        with pytest.raises(RankError, match="after starting helpers"):
            launch(starts_helpers, 2, secs, True, backend=backend)
    else:
        launch(starts_helpers, 2, secs, False, backend=backend)
    assert time.monotonic() - t < 30, "the launch waited for its ranks' helpers (sleep 60)"
    assert sleeping(secs) == []  # gone when launch returns, not later


# ---------------------------------------------------------------------------- kept errors (item 5)
def deadlocks(comm):
    if comm.rank == 0:
        comm.recv(1)
    comm.barrier()


def raises(comm):
    raise ValueError("on purpose")


@pytest.mark.parametrize("fn, error", [(deadlocks, CommTimeout), (raises, RankError)])
def test_kept_exceptions_keep_no_shared_memory(fn, error):
    """A notebook keeps the last exception (and its traceback): three of them must hold no
    arena (3 ranks: 24 MiB each)."""
    before = memfd_mapped_bytes()
    kept = []
    for _ in range(3):
        try:
            launch(fn, 3, timeout=0.5)
        except error as err:
            kept.append(err)
    assert len(kept) == 3
    assert memfd_mapped_bytes() == before
    assert all(e.__traceback__ is not None for e in kept)


# ---------------------------------------------------------------------------- killed caller (item 6)
KILLED_CALLER = """
    import os, sys, time
    from parlab.comm import launch

    def wait(comm, pids):
        with open(os.path.join(pids, f"rank{comm.rank}"), "w") as f:
            f.write(str(os.getpid()))
        comm.barrier()  # the store directory is in use
        with open(os.path.join(pids, f"ready{comm.rank}"), "w") as f:
            f.write("")
        time.sleep(120)

    launch(wait, 2, sys.argv[2], backend=sys.argv[1])
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_caller_killed_by_sigkill_leaves_no_worker_and_no_temp_directory(tmp_path, backend):
    tmp, pids = tmp_path / "tmp", tmp_path / "pids"
    tmp.mkdir()
    pids.mkdir()
    caller = start_script(tmp_path, KILLED_CALLER, backend, str(pids), env={"TMPDIR": str(tmp)})
    try:
        deadline = time.monotonic() + 120
        while len(list(pids.glob("ready*"))) < 2:
            assert caller.poll() is None, (tmp_path / "caller.err").read_text()
            assert time.monotonic() < deadline, "the ranks never started"
            time.sleep(0.05)
        if backend == "torch":
            assert [p.name[:13] for p in tmp.iterdir()] == ["parlab-store-"]  # what must go
        caller.kill()
        caller.wait()
    finally:
        caller.kill()
        caller.wait()
        caller.stdin.close()
        caller.stdout.close()
    workers = [int(p.read_text()) for p in pids.glob("rank*")]
    assert wait_gone(workers) == []
    assert list(tmp.iterdir()) == []


def numpy_ok(comm):
    return float(comm.all_reduce(np.ones(2))[0])


def test_a_launch_in_a_thread_leaves_the_main_thread_s_ctrl_c_handler_alone():
    import threading

    handler = signal.getsignal(signal.SIGINT)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", launch(numpy_ok, 2)))
    t.start()
    t.join(60)
    assert out["r"] == [2.0, 2.0]
    assert signal.getsignal(signal.SIGINT) is handler
    assert launch(numpy_ok, 2) == [2.0, 2.0]  # and the main thread's own launch restores it
    assert signal.getsignal(signal.SIGINT) is handler
