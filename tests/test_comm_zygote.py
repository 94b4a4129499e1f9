"""The zygote forks ranks that are what ``Popen`` of a fresh interpreter would have started: their
own session, exactly the descriptors they were given, the caller's environment and working
directory at launch time, their own random state; exit statuses as ``Popen`` reports them; and
it ends with its caller. With ``PARLAB_ZYGOTE=0`` ranks are the caller's own children again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from parlab.comm import RankDied, launch, zygote


def describe(comm):
    import numpy as np

    return {"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "pgid": os.getpgid(0),
            "cwd": os.getcwd(), "var": os.environ.get("PARLAB_ZYGOTE_TEST"), "draw": np.random.random(),
            "stdin": os.readlink("/proc/self/fd/0"), "argv0": sys.argv[0]}


def test_a_forked_rank_is_a_fresh_worker_with_the_callers_cwd_and_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PARLAB_ZYGOTE_TEST", "seen")  # set after any zygote started: a new one
    ranks = launch(describe, 2)
    for r in ranks:
        assert r["ppid"] in zygote.pids(), "the rank was not forked by this process's zygote"
        assert r["sid"] == r["pid"] == r["pgid"], "a rank leads its own session and process group"
        assert r["cwd"] == str(tmp_path)
        assert r["var"] == "seen"
        assert r["stdin"] == "/dev/null"
        assert r["argv0"].endswith(os.path.join("parlab", "comm", "worker.py"))
    assert ranks[0]["draw"] != ranks[1]["draw"], "numpy's global random state was copied by the fork"


def where(comm):
    return {"ppid": os.getppid(), "cwd": os.readlink("/proc/self/cwd"),
            "big": [len(os.environ.get(f"PARLAB_ZYGOTE_BIG{i}", "")) for i in range(3)]}


def test_a_launch_from_a_deleted_directory_or_with_a_300_kb_environment_goes_through_the_zygote(
        tmp_path, monkeypatch):
    """Attack review F3: the caller's working directory travels as a descriptor (a deleted one
    was a raw FileNotFoundError from os.getcwd()), its environment as what differs from the
    zygote's (300 KB did not fit one request: EMSGSIZE, zygote discarded, a cold start)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    for i in range(3):
        monkeypatch.setenv(f"PARLAB_ZYGOTE_BIG{i}", "x" * 100_000)
    ranks = launch(where, 2) + launch(where, 2)  # a zygote started here, then warm
    for r in ranks:
        assert r["ppid"] in zygote.pids(), "the rank was not forked by the zygote"
        assert r["cwd"] == f"{gone} (deleted)"
        assert r["big"] == [100_000] * 3


def held(comm):
    """The kinds of descriptor this rank holds, by number ("socket", "pipe", "/dev/null", ...)."""
    out = {}
    for fd in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}").split(":[")[0]
            out[int(fd)] = "memfd" if link.startswith("/memfd:parlab") else link  # names are random
        except OSError:  # the descriptor listdir itself used
            pass
    return out


def test_a_rank_holds_exactly_the_descriptors_popen_would_give_it(monkeypatch):
    """Its stdio and what launch passed, at the same numbers: the zygote's socket, lifeline,
    selector and the other ranks' pidfds are closed in the fork."""
    forked = launch(held, 3)
    monkeypatch.setenv("PARLAB_ZYGOTE", "0")
    started = launch(held, 3)
    for rank, (f, s) in enumerate(zip(forked, started, strict=True)):
        # (the numbers are the caller's, which differ between two launches; the kinds may not)
        assert sorted(f.values()) == sorted(s.values()), f"rank {rank}: forked {f}, Popen {s}"
        assert not [k for k in f.values() if "pidfd" in k]


@pytest.mark.parametrize("how, code, words", [("exit", 7, "exited with code 7"),
                                              ("kill", -signal.SIGKILL, "killed by SIGKILL")])
def test_a_ranks_end_is_reported_as_popen_reports_it(how, code, words):
    def die(comm, how):
        if comm.rank == 1:
            if how == "exit":
                os._exit(7)
            os.kill(os.getpid(), signal.SIGKILL)
        comm.barrier()

    with pytest.raises(RankDied, match=words) as err:
        launch(die, 2, how, timeout=30)
    assert err.value.rank == 1 and err.value.exitcode == code


def test_without_the_zygote_ranks_are_the_callers_children(monkeypatch):
    monkeypatch.setenv("PARLAB_ZYGOTE", "0")
    for r in launch(describe, 2):
        assert r["ppid"] == os.getpid()
        assert r["sid"] == r["pid"]


CALLER = textwrap.dedent("""
    import os, sys
    from parlab.comm import launch, zygote
    launch(lambda comm: comm.rank, 2)
    print(zygote.pids()[0], flush=True)
    sys.stdin.read()  # until the test kills this caller
""")


def test_the_zygote_ends_when_its_caller_is_killed():
    caller = subprocess.Popen([sys.executable, "-c", CALLER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        pid = int(caller.stdout.readline())
        os.kill(pid, 0)  # alive while its caller is
    finally:
        caller.kill()
        caller.wait()
    pidfd = os.pidfd_open(pid)
    try:
        import select

        assert select.select([pidfd], [], [], 60)[0], f"the zygote {pid} outlived its caller by 60 s"
    finally:
        os.close(pidfd)


def test_shutdown_ends_every_zygote_and_the_next_launch_starts_one():
    launch(lambda comm: None, 2)
    before = zygote.pids()
    assert before
    zygote.shutdown()
    assert zygote.pids() == []
    for pid in before:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert launch(lambda comm: comm.rank, 2) == [0, 1]
    assert zygote.pids() and set(zygote.pids()).isdisjoint(before)
