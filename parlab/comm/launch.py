"""``launch(fn, world_size, *args)``: run ``fn(comm, *args)`` on fresh processes, return each rank's result.

How the ranks start: as fresh interpreters (``python -m parlab.comm.worker``), never a fork of
the caller: forking a Jupyter kernel or a process with torch's thread pools copies threads and
locks in unknown states. To save each rank the seconds of importing torch, they are forked by a
*zygote* (``zygote.py``): a fresh single-threaded interpreter that has imported torch and
parlab.comm once, and forks a rank exactly as ``Popen`` would have started it (``PARLAB_ZYGOTE=0``:
``Popen`` of each rank). Unlike ``multiprocessing``'s spawn it never
re-imports the caller's ``__main__``: the function travels by value (cloudpickle), so a function
typed in a notebook cell or in a script without an ``if __name__ == "__main__"`` guard works.
Each worker inherits exactly the file descriptors it needs (``pass_fds``): its control socket,
its sockets to the other ranks, the anonymous shared arena and a lifeline pipe.

Failures end the launch within a fraction of a second, and nothing is left behind:
- a rank raises: ``RankError`` with its rank and traceback; the others are killed;
- a rank dies (killed, ``os._exit``): ``RankDied`` with its exit code and what it was doing;
- no progress for ``timeout`` seconds in a communication call (a recv nobody sends to,
  mismatched collectives): ``CommTimeout`` listing every rank and the call it is stuck in;
- mismatched calls that the ranks can see at once raise there, on both backends:
  ``CollectiveMismatch`` (message signatures differ), ``PeerGone`` (a recv from a rank that has
  returned) and ``UnreceivedMessage`` (a rank returns with a message it never received);
- one failure causes others (a rank killed mid-collective breaks its peers' connections):
  the death, or the first genuine error, is raised, never the lost connections it caused;
- a result that cannot be unpickled in the caller: ``RankError`` naming the rank;
- the caller is interrupted (Ctrl-C, a notebook's stop button): the workers are killed and
  the KeyboardInterrupt goes on.
Workers are killed with SIGKILL and reaped; the arena has no name, so the kernel frees it.

Nothing is left behind, whatever happens (a kernel survives all of these):
- Ctrl-C, once or twice, at any moment: SIGINT is taken only while the launch waits for
  results; while it starts processes or cleans up it is noted and delivered afterwards
  (``interrupts.py``), so no child is lost between ``Popen`` and the list that records it;
- a process a rank started: each worker leads its own process group and is a subreaper; the
  group and the tree are killed (``reaper.py``), and the workers' pipes are read until the
  worker itself has ended, never until every holder of the pipe has;
- an exception kept alive (a notebook keeps the last one): its traceback's frames inside the
  launch are cleared and the arena's mapping is closed, so it holds none of the arena;
- the caller SIGKILLed: the workers see their lifeline break, remove the launch's store
  directory (torch backend) and exit; the arena and sockets die with the last holder.
"""

from __future__ import annotations

import math
import os
import pickle
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from . import reaper, shm, tuning, zygote
from .errors import CommTimeout, RankDied, RankError, connection_lost
from .interrupts import DeferredInterrupts
from .message import ALGORITHMS, OPS
from .wire import recv_obj, send_obj

BACKENDS = ("local", "torch")
DEFAULT_CAPACITY = 4 << 20  # bytes of ring per ordered pair of ranks (local backend): 4 pieces of CHUNK_BYTES
STARTUP_LIMIT = 120.0  # seconds a rank may take to start (imports, torch rendezvous)
MAX_TIMEOUT = 7 * 86400.0  # seconds; torch turns the timeout into a timedelta (inf overflows)
MAX_CAPACITY = 1 << 30  # bytes per ring
LOST_GRACE = 2.0  # seconds a rank's lost connection waits for the death or error that explains it
LOST_SETTLE = 0.1  # seconds after which a lost connection with no rank ended is the error itself


def launch(fn, world_size: int, *args: Any, backend: str = "local", timeout: float = 60.0,
           capacity: int = DEFAULT_CAPACITY, stream: bool = False) -> list:
    """Run ``fn(comm, *args)`` on ``world_size`` new processes and return the list of results.

    ``backend``: 'local' (shared memory, home-made) or 'torch' (torch.distributed, gloo).
    ``timeout``: seconds a rank may wait in one communication call without progress (finite,
    at most MAX_TIMEOUT). ``capacity``: bytes of each shared-memory ring (local backend; a
    multiple of 64 from 64 KiB to MAX_CAPACITY). Wrong arguments raise here, before any
    process starts: TypeError for a wrong type, ValueError for a value out of range.
    ``stream``: print the workers' output as it comes; by default each rank's output is printed
    after the launch, rank by rank, so that a notebook's output is reproducible.
    """
    world_size, timeout, capacity = _checked(fn, world_size, backend, timeout, capacity, stream)
    import cloudpickle

    try:
        payload = cloudpickle.dumps((fn, args))
    except Exception as err:
        raise TypeError(f"launch could not serialise the function or its arguments: {err}") from err
    interrupts = DeferredInterrupts()  # from here a Ctrl-C is taken only while waiting
    run = None
    try:
        run = _Launch(world_size, backend, timeout, capacity if backend == "local" else 0, stream)
        run.sources = _code_index((fn, *args))
        run.start(payload)
        with interrupts.allowed():
            return run.run()
    except BaseException as err:
        # a kept exception (a notebook's last one) must not keep the arena mapped through the
        # locals of the launch's frames (issue 8 item 5): what its message needs is copied
        traceback.clear_frames(err.__traceback__)
        raise
    finally:
        try:
            if run is not None:
                run.cleanup()
        finally:
            interrupts.restore()


def _checked(fn, world_size, backend, timeout, capacity, stream) -> tuple[int, float, int]:
    """launch's arguments, checked before anything starts: (world_size, timeout, capacity)."""
    if not callable(fn):
        raise TypeError(f"fn must be a function fn(comm, *args), got {type(fn).__name__}")
    if isinstance(world_size, bool) or not isinstance(world_size, (int, np.integer)):
        raise TypeError(f"world_size must be an integer in 1..256, got {world_size!r} "
                        f"({type(world_size).__name__})")
    if not 1 <= world_size <= 256:
        raise ValueError(f"world_size must be an integer in 1..256, got {world_size!r}")
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.integer, np.floating)):
        raise TypeError(f"timeout must be a number of seconds, got {timeout!r} "
                        f"({type(timeout).__name__})")
    if not (timeout > 0 and math.isfinite(timeout)) or timeout > MAX_TIMEOUT:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r} "
                         f"(finite, at most {MAX_TIMEOUT:g} s)")
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
        raise TypeError(f"capacity must be an integer number of bytes, got {capacity!r} "
                        f"({type(capacity).__name__})")
    if capacity < (1 << 16) or capacity % 64 or capacity > MAX_CAPACITY:
        raise ValueError(f"capacity must be a multiple of 64 bytes and at least 64 KiB, got {capacity!r} "
                         f"(at most {MAX_CAPACITY >> 20} MiB)")
    if not isinstance(stream, bool):
        raise TypeError(f"stream must be True or False, got {stream!r}")
    return int(world_size), float(timeout), int(capacity)


class _Launch:
    def __init__(self, n: int, backend: str, timeout: float, capacity: int, stream: bool):
        self.n, self.backend, self.timeout, self.capacity, self.stream = n, backend, timeout, capacity, stream
        self.procs: list = []  # subprocess.Popen or zygote.ZygoteProcess
        self.ctrl: list[socket.socket] = []
        self.fds: list[int] = []  # to close in cleanup
        self.socks: list[socket.socket] = []
        self.out: list[list[bytes]] = [[] for _ in range(n)]
        self.err: list[list[bytes]] = [[] for _ in range(n)]
        self.sel: selectors.BaseSelector | None = None
        self.store_dir = ""  # torch backend: the FileStore's directory, made after the workers
        self.store_made = False
        self.arena: shm.Arena | None = None
        self.sources: dict[str, list[tuple[str, int, int]]] = {}
        self.partial: dict[tuple[str, int], bytes] = {}  # stream mode: the unfinished line of each pipe
        self.all_started: float | None = None  # see _watchdog
        self.warm = False  # a World's ranks: serve one function per "run" message (worker._serve)

    # ------------------------------------------------------------------ start
    def start(self, payload: bytes) -> None:
        """Make the arena, the sockets and the processes. Every resource is recorded on self in
        the statement that makes it (cleanup() frees what is recorded; SIGINT is held back)."""
        n, t0 = self.n, time.monotonic()
        tuning.read()  # the PARLAB_* variables the ranks will read: one line here if one is wrong
        self.sel = selectors.DefaultSelector()
        self.fds.append(shm.create_fd(shm.arena_size(n, self.capacity)))
        arena_fd = self.fds[-1]
        self.arena = shm.Arena(arena_fd, n, self.capacity)
        self.arena.status[:, shm.T_ENTER] = self.arena.status[:, shm.T_PROGRESS] = t0
        self.fds += os.pipe()
        life_r = self.fds[-2]
        peer_fds: list[dict[int, int]] = [{} for _ in range(n)]
        if self.backend == "local":
            for i in range(n):
                for j in range(i + 1, n):
                    self.socks += socket.socketpair()
                    peer_fds[i][j], peer_fds[j][i] = self.socks[-2].fileno(), self.socks[-1].fileno()
        else:  # made once the workers run: whoever of them outlives the caller removes it
            self.store_dir = os.path.join(tempfile.gettempdir(),
                                          f"parlab-store-{os.getpid()}-{secrets.token_hex(8)}")
        env = _worker_env(n, self.backend)
        for rank in range(n):
            parent, child = socket.socketpair()
            self.ctrl.append(parent)
            self.socks.append(child)
            fds = [child.fileno(), life_r, arena_fd, *peer_fds[rank].values()]
            self.procs.append(zygote.spawn([str(child.fileno()), str(life_r), self.store_dir or "-"],
                                           fds, env))
        for s in self.socks:  # the workers hold their ends now
            s.close()
        self.socks = []
        if self.store_dir:
            os.mkdir(self.store_dir, 0o700)
            self.store_made = True
        for rank, (parent, proc) in enumerate(zip(self.ctrl, self.procs, strict=True)):
            job = {"rank": rank, "world_size": n, "backend": self.backend, "t0": t0,
                   "timeout": self.timeout, "capacity": self.capacity, "arena_fd": arena_fd,
                   "peer_fds": peer_fds[rank], "sys_path": list(sys.path),
                   "store": os.path.join(self.store_dir, "store") if self.store_dir else "",
                   "payload": payload, "warm": self.warm}
            try:
                send_obj(parent, job)
            except OSError:
                pass  # it died at once; the loop below reports it
            self.sel.register(parent, selectors.EVENT_READ, ("ctrl", rank))
            self.sel.register(proc.stdout, selectors.EVENT_READ, ("out", rank))
            self.sel.register(proc.stderr, selectors.EVENT_READ, ("err", rank))
        os.close(life_r)
        self.fds.remove(life_r)

    # ------------------------------------------------------------------ wait
    def run(self) -> list:
        """Collect every rank's result. A worker stays alive after it reports (until cleanup),
        so its control socket is watched to the end: its EOF is a death, even after a result."""
        results: dict[int, Any] = {}
        self.all_started = None  # when the watchdog first saw no rank starting (this run)
        failures: dict[int, Exception] = {}  # rank -> RankError / RankDied, in arrival order
        lost_since: list[float] = []  # when the first failure another one may explain came
        while len(results) < self.n:
            for key, _ in self.sel.select(timeout=0.1):
                kind, rank = key.data
                if kind != "ctrl":
                    self._pipe(key.fileobj, kind, rank)
                    continue
                reply = recv_obj(key.fileobj)
                if reply is None or reply[0] == "error" or rank in failures:
                    self.sel.unregister(key.fileobj)
                if reply is None:
                    failures.setdefault(rank, self._died(rank, after_result=rank in results))
                elif reply[0] == "error":
                    failures[rank] = self._error(rank, *reply[1:])
                else:
                    try:
                        results[rank] = pickle.loads(reply[1])
                    except Exception as err:  # noqa: BLE001 - pickled on the rank, not loadable here
                        self.sel.unregister(key.fileobj)
                        failures[rank] = self._unloadable(rank, err)
            if failures and (verdict := self._verdict(results, failures, lost_since)) is not None:
                raise verdict
            self._watchdog(results)
        return [results[r] for r in range(self.n)]

    def _verdict(self, results: dict, failures: dict, lost_since: list[float]) -> Exception | None:
        """The error to raise for the failures seen so far, or None to keep collecting.

        One failure causes others: a rank killed mid-collective makes its peers' gloo calls fail
        with "Connection reset by peer" (PeerGone on the local backend), and these may reach the
        launcher first. So: a death wins; then the first genuine error; a lost connection alone
        waits (up to LOST_GRACE s, or until every rank is accounted for) for the death or error
        that explains it, unless its peer is known to have returned normally (then it *is* the
        error: a recv from a rank that returned)."""
        died = [e for e in failures.values() if isinstance(e, RankDied)]
        raised = [e for e in failures.values() if not isinstance(e, RankDied)]
        if any(e.rank not in results for e in died):
            return next(e for e in died if e.rank not in results)
        genuine = [e for e in raised if not _lost_connection(e)]
        if genuine:
            return genuine[0]
        if not raised:  # only ranks that died after returning their result: not (yet) a failure
            return None
        if died:  # a rank that returned, then died, broke the others' connections
            return died[0]
        for e in raised:
            peer = getattr(e.__cause__, "peer", None)
            if peer is not None and 0 <= peer < self.n and peer not in failures and (
                    peer in results or int(self.arena.status[peer, shm.STATE]) in (shm.FINISHING, shm.EXITING)):
                return e
        if not lost_since:
            lost_since.append(time.monotonic())
        waited = time.monotonic() - lost_since[0]
        if waited > LOST_GRACE or len(results) + len(failures) >= self.n:
            return raised[0]
        # a dying rank has closed its control socket before its connections to the others broke,
        # so its death is seen at once; none a moment later: the peer returned (local backend)
        if waited > LOST_SETTLE and not any(self._ended(r) for r in range(self.n) if r not in failures):
            return raised[0]
        return None

    def _ended(self, rank: int) -> bool:
        """Whether the worker's process has ended, without reaping it (cleanup does)."""
        proc = self.procs[rank]
        if proc.returncode is not None:
            return True
        if isinstance(proc, zygote.ZygoteProcess):  # the zygote reports without reaping
            return proc.poll() is not None
        if not hasattr(os, "waitid"):  # pragma: no cover - then LOST_GRACE decides
            return True
        try:
            return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def _unloadable(self, rank: int, err: Exception) -> RankError:
        """A result that pickled on the rank but cannot be unpickled here (issue 8 item 9)."""
        e = RankError(f"rank {rank} returned a result that the caller cannot unpickle: "
                      f"{type(err).__name__}: {err} (its class or function must be importable in "
                      "the caller, or defined in the notebook or script that launches; return "
                      "arrays, numbers, plain objects)", rank, type(err).__name__, "")
        e.__cause__ = err
        return e

    def _pipe(self, pipe, kind: str, rank: int) -> None:
        data = os.read(pipe.fileno(), 1 << 16)
        if not data:
            self.sel.unregister(pipe)
            return
        self._take(kind, rank, data)

    def _take(self, kind: str, rank: int, data: bytes) -> None:
        (self.out if kind == "out" else self.err)[rank].append(data)
        if self.stream:  # whole lines only: a print may arrive in pieces
            key = (kind, rank)
            text = self.partial.pop(key, b"") + data
            done, _, rest = text.rpartition(b"\n")
            if rest:
                self.partial[key] = rest
            if done:
                _relay(rank, done, sys.stdout if kind == "out" else sys.stderr)

    def _watchdog(self, results: dict) -> None:
        """Raise CommTimeout when a rank has waited ``timeout`` s in a call without progress.

        A rank still starting (importing, meeting the others: up to STARTUP_LIMIT s, and many
        seconds on a busy laptop) is no deadlock of those waiting for it: their clock starts
        when the last rank has started."""
        status, now = self.arena.status, time.monotonic()
        watched = (shm.STARTING, shm.IN_OP, shm.WAITING, shm.FINISHING)  # blocked on others
        starting = [r for r in range(self.n) if r not in results and int(status[r, shm.STATE]) == shm.STARTING]
        if starting:
            self.all_started = None
        elif self.all_started is None:
            self.all_started = now
        late = False
        for r in range(self.n):
            state = int(status[r, shm.STATE])
            if r in results or state not in watched:
                continue
            if state == shm.STARTING:
                late |= now - status[r, shm.T_PROGRESS] > STARTUP_LIMIT
            elif not starting:
                late |= now - max(status[r, shm.T_PROGRESS], self.all_started) > self.timeout
        if late:  # every rank blocked in communication is part of the deadlock
            stuck = [r for r in range(self.n) if r not in results and int(status[r, shm.STATE]) in watched]
            lines = [f"  rank {r}: {self._doing(r, now)}" for r in range(self.n)]
            raise CommTimeout(
                f"timed out: rank{'s' if len(stuck) > 1 else ''} {', '.join(map(str, stuck))} made no "
                f"progress for {self.timeout:g} s (launch timeout={self.timeout:g}); a deadlock: a "
                "recv that no rank sends to, or ranks calling different collectives.\n"
                + "\n".join(lines), stuck)

    def _doing(self, r: int, now: float, alive: bool = True) -> str:
        """What rank r is doing (or, ``alive=False``, was doing), from its status-table row."""
        row = self.arena.status[r]
        state = int(row[shm.STATE])
        if alive and self.procs[r].poll() is not None and state != shm.DONE:
            return f"exited with code {self.procs[r].returncode}"
        if state in (shm.IN_OP, shm.WAITING):
            op, algo, peer = OPS[int(row[shm.OP])], ALGORITHMS[int(row[shm.ALGO])], int(row[shm.PEER])
            what = "send/recv" if op == "p2p" else f"{op} #{int(row[shm.SEQ])}" + (f" ({algo})" if algo else "")
            wait = f", waiting for a message from rank {peer}" if state == shm.WAITING and peer >= 0 else ""
            return f"in {what}{wait} for {now - row[shm.T_ENTER]:.1f} s"
        if state == shm.FINISHING:
            return f"finished its function, still sending for {now - row[shm.T_ENTER]:.1f} s"
        return shm.STATE_NAMES[state]

    # ------------------------------------------------------------------ failures
    def _error(self, rank: int, exc_type: str, text: str, tb: str, pickled: bytes | None) -> RankError:
        tb = _with_sources(tb, self.sources)
        err = RankError(f"rank {rank} raised {exc_type}: {text}\n\n"
                        f"Traceback of rank {rank} (most recent call last):\n{_user_frames(tb)}",
                        rank, exc_type, tb)
        if pickled is not None:
            try:
                err.__cause__ = pickle.loads(pickled)
            except Exception:  # noqa: BLE001 - the text above says it all
                pass
        return err

    def _died(self, rank: int, after_result: bool = False) -> RankDied:
        proc = self.procs[rank]
        now = time.monotonic()
        try:
            code = proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code} without returning a result (os._exit or a crash)"
        stderr = b"".join(self.err[rank]).decode(errors="replace").strip()
        tail = "\n".join(stderr.splitlines()[-15:])
        doing = "waiting for the others, after returning its result" if after_result else \
            self._doing(rank, now, alive=code is None)
        return RankDied(f"rank {rank} {how} while {doing}" + (f"\n\nits stderr ends with:\n{tail}" if tail else ""),
                        rank, code)

    # ------------------------------------------------------------------ cleanup
    def cleanup(self) -> None:
        """Kill every worker with its process group and descendants, reap it, close every
        descriptor, print the workers' output. Runs with SIGINT held back (interrupts.py)."""
        for p in self.procs:  # a group outlives its leader while a member (a helper) lives
            reaper.kill_tree(p.pid) if p.returncode is None else reaper.kill_group(p.pid)
        for p in self.procs:
            p.wait()
        if self.sel is not None:
            for key in list(self.sel.get_map().values()):
                if key.data[0] != "ctrl":  # the worker has ended: take what its pipe holds, and
                    self._drain(key.fileobj, *key.data)  # never wait for a helper holding it too
            self.sel.close()
        for p in self.procs:
            p.stdout.close()
            p.stderr.close()
        for s in self.ctrl + self.socks:
            s.close()
        if self.arena is not None:
            self.arena.close()
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        if self.store_made:
            shutil.rmtree(self.store_dir, ignore_errors=True)
        if self.stream:
            for (kind, rank), rest in self.partial.items():
                _relay(rank, rest, sys.stdout if kind == "out" else sys.stderr)
        else:
            for rank in range(self.n):
                _relay(rank, b"".join(self.out[rank]), sys.stdout)
                _relay(rank, b"".join(self.err[rank]), sys.stderr)


    def _drain(self, pipe, kind: str, rank: int) -> None:
        os.set_blocking(pipe.fileno(), False)
        try:
            while data := os.read(pipe.fileno(), 1 << 16):
                self._take(kind, rank, data)
        except BlockingIOError:  # empty, but a helper of the rank still holds it open
            pass


def _lost_connection(err: Exception) -> bool:
    """A rank's error that another rank's end may have caused: PeerGone, or gloo's raw
    "Connection reset/closed by peer"."""
    return getattr(err, "exc_type", "") == "PeerGone" or connection_lost(str(err).split("\n\n")[0])


def _relay(rank: int, data: bytes, stream) -> None:
    text = data.decode(errors="replace")
    if text:
        lines = text.splitlines()
        stream.write("".join(f"[rank {rank}] {line}\n" for line in lines))
        stream.flush()


def _code_index(objects, depth: int = 3) -> dict[str, list[tuple[str, int, int]]]:
    """Where the functions that travel by value were written: name -> [(file, first, last line)].

    cloudpickle renames their file "<dynamic-code>"; the caller still has the source (a script,
    or a notebook cell in IPython's linecache), so a worker's traceback can show its lines."""
    index: dict[str, list[tuple[str, int, int]]] = {}
    seen: set[int] = set()

    def code(c) -> None:
        if id(c) in seen:
            return
        seen.add(id(c))
        lines = [line for _, _, line in c.co_lines() if line is not None]
        index.setdefault(c.co_name, []).append((c.co_filename, c.co_firstlineno, max(lines, default=0)))
        for const in c.co_consts:
            if hasattr(const, "co_lines"):
                code(const)

    def visit(obj, d: int) -> None:
        c = getattr(obj, "__code__", None)
        if c is None or d < 0 or id(c) in seen:
            return
        code(c)
        for name in c.co_names:  # helpers it calls, defined beside it
            g = getattr(obj, "__globals__", {}).get(name)
            if getattr(g, "__code__", None) is not None and g.__code__.co_filename == c.co_filename:
                visit(g, d - 1)

    for obj in objects:
        visit(obj, depth)
    return index


def _with_sources(tb: str, index: dict[str, list[tuple[str, int, int]]]) -> str:
    """Put back the file name and source line of "<dynamic-code>" frames."""
    import linecache
    import re

    out = []
    for line in tb.splitlines():
        out.append(line)
        m = re.match(r'  File "<dynamic-code>", line (\d+), in (\S+)$', line)
        if not m:
            continue
        num, name = int(m.group(1)), m.group(2)
        for filename, first, last in index.get(name, []):
            if first <= num <= last:
                out[-1] = f'  File "{filename}", line {num}, in {name}'
                src = linecache.getline(filename, num).strip()
                if src:
                    out.append(f"    {src}")
                break
    return "\n".join(out)


def _user_frames(tb: str) -> str:
    """A worker's traceback without the launcher's own frames (worker.py) at its top."""
    lines = tb.splitlines()
    keep = [i for i, line in enumerate(lines) if line.startswith("  File ") and "parlab/comm/worker.py" not in line]
    body = lines[keep[0]:] if keep else lines[1:]
    return "\n".join(body)


def _worker_env(n: int, backend: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    root = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    # n ranks share the machine's cores: one intra-op thread each unless told otherwise
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // n)))
    # gloo's interface (only the torch backend reads it): set for both, so that both backends'
    # ranks have one environment and one zygote
    env.setdefault("GLOO_SOCKET_IFNAME", "lo0" if sys.platform == "darwin" else "lo")
    return env
