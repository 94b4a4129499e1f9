"""Suite-wide guards: no test may leave a process, a memfd, a shared-memory segment or a temp dir behind.

After each test module: no live child process, no parlab shared-memory segment in /dev/shm,
no parlab memfd open or mapped in this process. After the whole session, also: no process
started by this session (directly or not: every one carries ``PARLAB_TEST_SESSION`` in its
environment, a worker's helper or a process re-parented to init included), and no new
``parlab-*`` or ``torchelastic_*`` entry in the temp dir.
"""

from __future__ import annotations

import multiprocessing
import os
import secrets
import signal
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import settings

# No test may depend on how fast this machine is at the moment: hypothesis's default deadline
# (200 ms an example) fails examples on a busy laptop that pass on a quiet one.
settings.register_profile("parlab", deadline=None)
settings.load_profile("parlab")

SHM = Path("/dev/shm")
SHM_PREFIX = "parlab"  # every shared-memory segment parlab creates is named parlab*
TEMP_PREFIXES = ("parlab-", "torchelastic_")  # launch's torch store; torchrun's default log dir
SESSION_VAR = "PARLAB_TEST_SESSION"
SESSION = f"{os.getpid()}-{secrets.token_hex(6)}"
os.environ[SESSION_VAR] = SESSION  # inherited by every process this session starts
SETTLE_S = 10.0  # seconds a leftover may take to go (a process exiting; another run's launch)


def parlab_segments() -> set[str]:
    if not SHM.is_dir():
        return set()
    return {p.name for p in SHM.iterdir() if p.name.lstrip("/").startswith(SHM_PREFIX)}


def live_children() -> list[int]:
    """PIDs of this process's live (non-zombie) children, less its zygotes (parlab.comm.zygote:
    the warm process that forks ranks lives as long as this process, and ends with it)."""
    from parlab.comm import zygote

    pids = []
    task = Path(f"/proc/{os.getpid()}/task")
    for t in task.iterdir() if task.is_dir() else []:
        try:
            pids += [int(p) for p in (t / "children").read_text().split()]
        except OSError:
            continue
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and pid not in zygote.pids():
            alive.append(pid)
    return alive


def has_ended(pid: int, limit: float = 120.0) -> bool:
    """Whether process ``pid`` (a rank: the caller's child, or its zygote's) ends within
    ``limit`` seconds; a zombie has ended. Waits on its pidfd, not by polling."""
    import select

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], limit)[0])
    finally:
        os.close(fd)


def parlab_memfds() -> list[str]:
    """parlab memfd arenas this process holds: open descriptors and mappings."""
    held = []
    fds = Path("/proc/self/fd")
    for fd in fds.iterdir() if fds.is_dir() else []:
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("/memfd:parlab"):
            held.append(f"fd {fd.name}: {link}")
    maps = Path("/proc/self/maps")
    if maps.exists():
        held += [f"mapped: {line}" for line in maps.read_text().splitlines() if "memfd:parlab" in line]
    return held


def session_processes() -> list[str]:
    """Live processes other than this one that carry this session's mark: 'pid cmdline'."""
    mark = f"{SESSION_VAR}={SESSION}".encode()
    found = []
    for p in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            if mark not in (p / "environ").read_bytes().split(b"\0"):
                continue
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile; a zombie's environ reads empty
            continue
        found.append(f"{p.name} {cmd.strip()[:120]}")
    return found


def temp_entries() -> set[str]:
    """parlab-* / torchelastic_* entries of the temp dir, less the store of a launch that runs
    in another (live) process outside this session (parlab-store-<caller pid>-<random>)."""
    tmp = Path(tempfile.gettempdir())
    names = {p.name for p in tmp.iterdir() if p.name.startswith(TEMP_PREFIXES)}
    return {n for n in names if not _someone_elses(tmp / n)}


def _ours(pid: str) -> bool:
    if int(pid) == os.getpid():
        return True
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{SESSION_VAR}={SESSION}".encode() in env


def _someone_elses(path: Path) -> bool:
    """In use by another live run on this machine (other people's tests run beside ours): its
    name carries a live caller's pid (parlab-store-<pid>-...) or only others hold files in it."""
    pid = path.name.removeprefix("parlab-store-").split("-")[0]
    if path.name.startswith("parlab-store-") and pid.isdigit() and Path(f"/proc/{pid}").exists():
        return not _ours(pid)
    holders = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd).startswith(f"{path}/"):
                    holders.add(proc.name)
                    break
            except OSError:
                continue
    return bool(holders) and not any(_ours(h) for h in holders)


def settled(check, limit: float = SETTLE_S):
    """check()'s answer once it is empty, or what is still there after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while (left := check()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture
def ctrl_c_delivered():
    """SIGINT raises KeyboardInterrupt in this process for the test, as Ctrl-C at a terminal
    does, whatever disposition the suite inherited (a shell's background job, nohup and some CI
    runners start it with SIGINT ignored, and then Python installs no handler); restored after."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.fixture(autouse=True, scope="session")
def nothing_left_by_the_session():
    """After the whole session: no process it started, no memfd, no new temp directory."""
    from parlab.comm import zygote

    before = temp_entries()
    yield
    zygote.shutdown()  # the zygotes this process kept warm end with the session
    for p in multiprocessing.active_children():
        p.join(timeout=0)
    procs = settled(session_processes)
    memfds = settled(parlab_memfds, 1.0)
    temps = settled(lambda: sorted(temp_entries() - before))
    problems = [f"processes started by this test session are still running: {procs}"] * bool(procs)
    problems += [f"parlab memfds still held: {memfds}"] * bool(memfds)
    problems += [f"temp directories left in {tempfile.gettempdir()}: {temps}"] * bool(temps)
    assert not problems, "; ".join(problems)


@pytest.fixture(autouse=True, scope="module")
def no_leaks():
    """After each test module: no new parlab shared-memory segment, no live child process
    (kernels started by nbval and the browser test's server are children only while they run),
    no parlab memfd held by this process."""
    before = parlab_segments()
    yield
    for p in multiprocessing.active_children():  # reap finished mp children so they don't count
        p.join(timeout=0)
    leaked = parlab_segments() - before
    assert not leaked, f"shared-memory segments left behind: {sorted(leaked)}"
    children = settled(live_children)  # a process ending as the module ends may take a moment
    assert not children, f"child processes left behind: {children}"
    memfds = settled(parlab_memfds, 1.0)
    assert not memfds, f"parlab memfds left held by the test process: {memfds}"


# Warm worlds to share between the tests of a module (parlab.comm.World): module-scoped, so that
# they are closed before the module's leak guard (no_leaks) looks; one per backend (params).
# A test that makes a run fail gets a fresh set of ranks on the next run (World replaces them).
def _world(request, n: int):
    from parlab.comm import World

    world = World(n, backend=request.param, timeout=60)
    yield world
    world.close()


@pytest.fixture(scope="module", params=["local", "torch"])
def world2(request):
    """A warm 2-rank World, once per backend ('local', 'torch') per module."""
    yield from _world(request, 2)


@pytest.fixture(scope="module", params=["local", "torch"])
def world4(request):
    """A warm 4-rank World, once per backend ('local', 'torch') per module."""
    yield from _world(request, 4)


@pytest.fixture(scope="module")
def warm_launches(request):
    """For a module whose tests use ``launch`` only as the way to run code on n ranks: each
    ``launch(fn, n, ...)`` of the module (and of the exercise checkers) runs on a warm ``World``
    of the same (n, backend, timeout, capacity), started once for the module and closed at its
    end. A World run is a launch on warm ranks: a fresh communicator, the same errors, its ranks
    replaced after a failure; only process start and imports (seconds with torch) are saved.
    Tests of launch itself (start-up, Ctrl-C, leaks, timing) keep real launches.
    Use with ``pytestmark = pytest.mark.usefixtures("warm_launches")``."""
    import parlab.checks.comm
    import parlab.checks.ranks
    from parlab.comm import World, zygote
    from parlab.comm import launch as cold_launch
    from parlab.comm.launch import DEFAULT_CAPACITY

    worlds: dict[tuple, World] = {}

    def launch(fn, world_size, *args, backend="local", timeout=60.0, capacity=DEFAULT_CAPACITY,
               stream=False):
        if stream:
            return cold_launch(fn, world_size, *args, backend=backend, timeout=timeout,
                               capacity=capacity, stream=stream)
        # ranks read their environment once, at start: a test that sets a variable gets new
        # ranks (pytest's own per-test PYTEST_CURRENT_TEST is not one: it would make every
        # test start its ranks anew)
        env = tuple(sorted((k, v) for k, v in os.environ.items() if k not in zygote.VOLATILE))
        key = (world_size, backend, timeout, capacity, env)
        if key not in worlds:
            worlds[key] = World(world_size, backend=backend, timeout=timeout, capacity=capacity)
        return worlds[key].run(fn, *args)

    patch = pytest.MonkeyPatch()
    for target in (request.module, parlab.checks.comm, parlab.checks.ranks):
        if getattr(target, "launch", None) is cold_launch:
            patch.setattr(target, "launch", launch)
    yield
    patch.undo()
    for world in worlds.values():
        world.close()


@pytest.fixture(scope="module")
def one_thread():
    """Two cores shared by many: keep torch to one thread for a module's tests (and restore it).
    Use with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---------------------------------------------------------------- where the suite's time goes
SLOWEST_FILES = 10
_seconds_by_file: dict[str, float] = {}


#: the longest files (test-seconds of a quiet run), started first: ``make test`` deals whole files
#: to its workers in collection order, so a long file collected last would run alone at the end
FIRST = ("tests/test_browser.py", "tests/test_browser_shard1.py", "tests/test_browser_shard2.py",
         "tests/test_train_cli.py", "tests/test_exercises.py", "tests/test_figure_text.py",
         "tests/test_comm_widget.py", "tests/test_comm_lifecycle.py", "tests/test_parallel_pipeline.py")


def pytest_collection_modifyitems(config, items):
    """The files of ``FIRST`` before the others (each file's items stay together, in order)."""
    def key(item):
        path = item.nodeid.split("::")[0]
        return FIRST.index(path) if path in FIRST else len(FIRST)

    items.sort(key=key)  # stable: the other files keep their order


def pytest_runtest_logreport(report):
    """Sum each file's test seconds (setup, call and teardown; on xdist, the workers' reports
    reach the controller here too)."""
    path = report.nodeid.split("::")[0]
    _seconds_by_file[path] = _seconds_by_file.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """The slowest files at the end of every run, and the share of the test-seconds they took."""
    if not _seconds_by_file or hasattr(terminalreporter.config, "workerinput"):
        return
    total = sum(_seconds_by_file.values())
    rows = sorted(_seconds_by_file.items(), key=lambda kv: -kv[1])[:SLOWEST_FILES]
    terminalreporter.section(f"slowest {len(rows)} files (test-seconds, of {total:.0f} in all)")
    for path, secs in rows:
        terminalreporter.write_line(f"{secs:8.1f} s  {100 * secs / total:4.1f}%  {path}")
