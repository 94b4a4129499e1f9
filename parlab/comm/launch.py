"""``launch(fn, world_size, *args)``: run ``fn(comm, *args)`` on fresh processes, return each rank's result.

How the ranks start: ``subprocess.Popen`` of a fresh interpreter (``python -m
parlab.comm.worker``), not ``fork``: forking a Jupyter kernel or a process with torch's thread
pools copies threads and locks in unknown states. Unlike ``multiprocessing``'s spawn it never
re-imports the caller's ``__main__``: the function travels by value (cloudpickle), so a function
typed in a notebook cell or in a script without an ``if __name__ == "__main__"`` guard works.
Each worker inherits exactly the file descriptors it needs (``pass_fds``): its control socket,
its sockets to the other ranks, the anonymous shared arena and a lifeline pipe.

Failures end the launch within a fraction of a second, and nothing is left behind:
- a rank raises: ``RankError`` with its rank and traceback; the others are killed;
- a rank dies (killed, ``os._exit``): ``RankDied`` with its exit code and what it was doing;
- no progress for ``timeout`` seconds in a communication call (a recv nobody sends to,
  mismatched collectives): ``CommTimeout`` listing every rank and the call it is stuck in;
- mismatched calls that the ranks can see at once raise there: ``CollectiveMismatch`` (message
  signatures differ), ``PeerGone`` (a recv from a rank that has returned), and on the local
  backend ``UnreceivedMessage`` (a rank returns with a message it never received);
- the caller is interrupted (Ctrl-C, a notebook's stop button): the workers are killed and
  the KeyboardInterrupt goes on.
Workers are killed with SIGKILL and reaped; the arena has no name, so the kernel frees it.
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import shm
from .errors import CommTimeout, RankDied, RankError
from .message import ALGORITHMS, OPS
from .wire import recv_obj, send_obj

BACKENDS = ("local", "torch")
DEFAULT_CAPACITY = 4 << 20  # bytes of ring per ordered pair of ranks (local backend): 4 pieces of CHUNK_BYTES
STARTUP_LIMIT = 120.0  # seconds a rank may take to start (imports, torch rendezvous)


def launch(fn, world_size: int, *args: Any, backend: str = "local", timeout: float = 60.0,
           capacity: int = DEFAULT_CAPACITY, stream: bool = False) -> list:
    """Run ``fn(comm, *args)`` on ``world_size`` new processes and return the list of results.

    ``backend``: 'local' (shared memory, home-made) or 'torch' (torch.distributed, gloo).
    ``timeout``: seconds a rank may wait in one communication call without progress.
    ``capacity``: bytes of each shared-memory ring (local backend).
    ``stream``: print the workers' output as it comes; by default each rank's output is printed
    after the launch, rank by rank, so that a notebook's output is reproducible.
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or not 1 <= world_size <= 256:
        raise ValueError(f"world_size must be an integer in 1..256, got {world_size!r}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if capacity < (1 << 16) or capacity % 64:
        raise ValueError(f"capacity must be a multiple of 64 bytes and at least 64 KiB, got {capacity!r}")
    import cloudpickle

    try:
        payload = cloudpickle.dumps((fn, args))
    except Exception as err:
        raise TypeError(f"launch could not serialise the function or its arguments: {err}") from err
    run = _Launch(world_size, backend, timeout, capacity if backend == "local" else 0, stream)
    run.sources = _code_index((fn, *args))
    try:
        return run.run(payload)
    finally:
        run.cleanup()


class _Launch:
    def __init__(self, n: int, backend: str, timeout: float, capacity: int, stream: bool):
        self.n, self.backend, self.timeout, self.capacity, self.stream = n, backend, timeout, capacity, stream
        self.procs: list[subprocess.Popen] = []
        self.ctrl: list[socket.socket] = []
        self.fds: list[int] = []  # to close in cleanup
        self.socks: list[socket.socket] = []
        self.out: list[list[bytes]] = [[] for _ in range(n)]
        self.err: list[list[bytes]] = [[] for _ in range(n)]
        self.sel = selectors.DefaultSelector()
        self.tmp: tempfile.TemporaryDirectory | None = None
        self.arena: shm.Arena | None = None
        self.sources: dict[str, list[tuple[str, int, int]]] = {}
        self.partial: dict[tuple[str, int], bytes] = {}  # stream mode: the unfinished line of each pipe

    # ------------------------------------------------------------------ start
    def start(self, payload: bytes) -> None:
        n, t0 = self.n, time.monotonic()
        arena_fd = shm.create_fd(shm.arena_size(n, self.capacity))
        self.fds.append(arena_fd)
        self.arena = shm.Arena(arena_fd, n, self.capacity)
        self.arena.status[:, shm.T_ENTER] = self.arena.status[:, shm.T_PROGRESS] = t0
        life_r, life_w = os.pipe()
        self.fds += [life_r, life_w]
        peer_fds: list[dict[int, int]] = [{} for _ in range(n)]
        if self.backend == "local":
            for i in range(n):
                for j in range(i + 1, n):
                    a, b = socket.socketpair()
                    self.socks += [a, b]
                    peer_fds[i][j], peer_fds[j][i] = a.fileno(), b.fileno()
        else:
            self.tmp = tempfile.TemporaryDirectory(prefix="parlab-store-")
        env = _worker_env(n, self.backend)
        for rank in range(n):
            parent, child = socket.socketpair()
            self.ctrl.append(parent)
            self.socks.append(child)
            fds = [child.fileno(), life_r, arena_fd, *peer_fds[rank].values()]
            proc = subprocess.Popen(
                [sys.executable, "-m", "parlab.comm.worker", str(child.fileno())],
                pass_fds=fds, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=env, start_new_session=True)
            self.procs.append(proc)
            child.close()
            job = {"rank": rank, "world_size": n, "backend": self.backend, "t0": t0,
                   "timeout": self.timeout, "capacity": self.capacity, "arena_fd": arena_fd,
                   "lifeline": life_r, "peer_fds": peer_fds[rank], "sys_path": list(sys.path),
                   "store": os.path.join(self.tmp.name, "store") if self.tmp else "",
                   "payload": payload}
            try:
                send_obj(parent, job)
            except OSError:
                pass  # it died at once; the loop below reports it
            self.sel.register(parent, selectors.EVENT_READ, ("ctrl", rank))
            self.sel.register(proc.stdout, selectors.EVENT_READ, ("out", rank))
            self.sel.register(proc.stderr, selectors.EVENT_READ, ("err", rank))
        for s in self.socks:  # the workers hold their ends now
            s.close()
        self.socks = []
        os.close(life_r)
        self.fds.remove(life_r)

    # ------------------------------------------------------------------ wait
    def run(self, payload: bytes) -> list:
        self.start(payload)
        results: dict[int, Any] = {}
        while len(results) < self.n:
            for key, _ in self.sel.select(timeout=0.1):
                kind, rank = key.data
                if kind != "ctrl":
                    self._pipe(key.fileobj, kind, rank)
                    continue
                reply = recv_obj(key.fileobj)
                self.sel.unregister(key.fileobj)
                if reply is None:
                    raise self._died(rank)
                if reply[0] == "error":
                    raise self._error(rank, *reply[1:])
                results[rank] = pickle.loads(reply[1])
            self._watchdog(results)
        return [results[r] for r in range(self.n)]

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
        status, now = self.arena.status, time.monotonic()
        watched = (shm.STARTING, shm.IN_OP, shm.WAITING, shm.FINISHING)  # blocked on others
        late = False
        for r in range(self.n):
            state = int(status[r, shm.STATE])
            limit = STARTUP_LIMIT if state == shm.STARTING else self.timeout
            if r not in results and state in watched and now - status[r, shm.T_PROGRESS] > limit:
                late = True
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

    def _died(self, rank: int) -> RankDied:
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
        doing = self._doing(rank, now, alive=code is None)
        return RankDied(f"rank {rank} {how} while {doing}" + (f"\n\nits stderr ends with:\n{tail}" if tail else ""),
                        rank, code)

    # ------------------------------------------------------------------ cleanup
    def cleanup(self) -> None:
        """Kill and reap every worker, close every descriptor, print the workers' output."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()
        for key in list(self.sel.get_map().values()):
            if key.data[0] != "ctrl":
                while data := os.read(key.fileobj.fileno(), 1 << 16):
                    self._take(*key.data, data)
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
        if self.tmp is not None:
            self.tmp.cleanup()
        if self.stream:
            for (kind, rank), rest in self.partial.items():
                _relay(rank, rest, sys.stdout if kind == "out" else sys.stderr)
        else:
            for rank in range(self.n):
                _relay(rank, b"".join(self.out[rank]), sys.stdout)
                _relay(rank, b"".join(self.err[rank]), sys.stderr)


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
    if backend == "torch":
        env.setdefault("GLOO_SOCKET_IFNAME", "lo0" if sys.platform == "darwin" else "lo")
    return env
