"""A fork server for ``launch``: ranks forked from a process that has already imported torch.

A cold rank is a fresh interpreter that imports numpy, cloudpickle, parlab.comm and (for the
torch backend, or a function that uses tensors) torch: about 1.7 CPU-seconds per rank, so 4
ranks on a 2-core laptop take 3-8 s to start, more under load. A *zygote* pays that once: a
fresh interpreter (``python -m parlab.comm.zygote``, started like a rank, by ``Popen``) imports
all of it, then forks one rank per request. The rank a fork makes is what ``Popen`` would have
made: its own session and process group, exactly the inherited descriptors it was given (at the
same numbers), stdin on /dev/null and stdout/stderr on the caller's pipes, the caller's
environment and working directory, then ``parlab.comm.worker.main`` as ``-m`` would run it.
(Android starts apps this way, and CPython's ``forkserver`` start method workers.)

Why a fork is safe here: the zygote has one thread (it imports, it never computes: torch's and
OpenMP's thread pools start at a first operation, and the ranks get ``OMP_NUM_THREADS``), so no
lock is held by a thread the child lacks. What a fork would share and a fresh process would not
is made fresh in the child: numpy's global random state is reseeded (``random`` reseeds
itself), the zygote's own descriptors are closed.

A rank is the zygote's child, not the caller's, so the zygote reports its end: it watches each
rank's pidfd, reads the exit status *without reaping* (``waitid(WNOWAIT)``) and sends it; the
rank stays a zombie, its pid reserved, until the caller has seen the status and asks for the
reap, as ``Popen.wait`` would. ``ZygoteProcess`` offers what ``launch`` uses of ``Popen``.

One zygote per environment (what the ranks read at import, such as ``OMP_NUM_THREADS``, must
be what the zygote read), at most ``MAX_ZYGOTES`` kept. It ends when the caller ends (a lifeline
pipe, as the ranks have) or at ``shutdown()``. ``PARLAB_ZYGOTE=0`` turns it off; where it cannot
start (no pidfd: not Linux 5.3+), ranks start as fresh interpreters, as before.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import select
import selectors
import socket
import subprocess
import sys
import threading

MAX_ZYGOTES = 2
READY_LIMIT = 120.0  # seconds the zygote may take to import (as a rank may to start)
#: what the ranks import, once (a rank still imports anything else it needs, as a fresh one
#: would; what the zygote imported is the code as it was when the zygote started)
PRELOAD = ("numpy", "cloudpickle", "torch", "torch.distributed", "parlab.comm.worker",
           "parlab.comm.engine", "parlab.comm.local", "parlab.comm.torch_backend", "parlab.parallel",
           "parlab.costmodel")
_PACKET = 1 << 20  # bytes of one request or reply (an environment and a few numbers)
_MAX_FDS = 64


class ZygoteGone(OSError):
    """The zygote ended or did not start: the caller starts its ranks as fresh interpreters."""


# ---------------------------------------------------------------------------------- the caller
class ZygoteProcess:
    """What ``launch`` uses of ``subprocess.Popen`` (pid, stdout, stderr, poll, wait,
    returncode) for a rank the zygote forked. Whether it has ended is read from the kernel (a
    pidfd: the zygote reaps only on request, so the pid cannot be reused meanwhile); its exit
    status comes from the zygote."""

    def __init__(self, zygote: Zygote, pid: int, stdout, stderr):
        self.zygote, self.pid, self.stdout, self.stderr = zygote, pid, stdout, stderr
        self.returncode: int | None = None
        self._pidfd: int | None = os.pidfd_open(pid)

    def _ended(self, timeout: float | None) -> bool:
        return bool(select.select([self._pidfd], [], [], timeout)[0])

    def poll(self) -> int | None:
        if self.returncode is None and not self._ended(0):
            return None
        return self.wait()

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._ended(timeout):
                raise subprocess.TimeoutExpired(f"rank pid {self.pid}", timeout)
            self.returncode = self.zygote.status_of(self.pid)
            os.close(self._pidfd)
            self._pidfd = None
        return self.returncode

    def __del__(self):
        if self._pidfd is not None:
            os.close(self._pidfd)


class Zygote:
    def __init__(self, env: dict[str, str]):
        self.lock = threading.Lock()
        self.codes: dict[int, int] = {}  # pid -> exit status, reported and not yet reaped
        self.live: set[int] = set()  # ranks forked and not yet waited for
        self.retired = False  # no more forks: it ends once its live ranks have been waited for
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        life_r, self.life_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "parlab.comm.zygote", str(theirs.fileno()), str(life_r)],
                pass_fds=[theirs.fileno(), life_r], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        finally:
            theirs.close()
            os.close(life_r)
        try:
            reply = self._recv(READY_LIMIT)
            if not reply or reply[0] != "ready":
                raise ZygoteGone(f"the zygote did not start in {READY_LIMIT:g} s")
        except ZygoteGone:
            self.close()
            raise

    def _recv(self, timeout: float | None):
        """The next reply (exit statuses are recorded on the way), None after ``timeout``
        seconds; ZygoteGone once the zygote has ended."""
        try:
            self.sock.settimeout(timeout)
            data = self.sock.recv(_PACKET)
        except (TimeoutError, BlockingIOError):
            return None
        except OSError as err:
            raise ZygoteGone(f"the zygote's socket failed: {err}") from None
        if not data:
            raise ZygoteGone("the zygote ended")
        reply = pickle.loads(data)
        if reply[0] == "exit":
            self.codes[reply[1]] = reply[2]
        return reply

    def spawn(self, argv: list[str], pass_fds: list[int], env: dict[str, str]) -> ZygoteProcess:
        """Fork ``python -m parlab.comm.worker argv...`` with ``pass_fds`` at their numbers."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            with self.lock:
                request = {"argv": argv, "fds": list(pass_fds), "env": env, "cwd": os.getcwd()}
                try:
                    socket.send_fds(self.sock, [pickle.dumps(request)], [out_w, err_w, *pass_fds])
                    while (reply := self._recv(READY_LIMIT)) is not None and reply[0] == "exit":
                        pass
                except OSError as err:
                    raise ZygoteGone(f"the zygote did not answer: {err}") from None
            if reply is None or reply[0] != "spawned":
                raise ZygoteGone(f"the zygote could not fork a rank: {reply!r}")
        except BaseException:
            os.close(out_r)
            os.close(err_r)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        self.live.add(reply[1])
        return ZygoteProcess(self, reply[1], open(out_r, "rb", buffering=0), open(err_r, "rb", buffering=0))

    def status_of(self, pid: int) -> int:
        """The exit status of ``pid``, which has ended (the zygote reports it at once), then
        free its pid (the zygote reaps it)."""
        with self.lock:
            while pid not in self.codes:
                try:
                    self._recv(None)
                except ZygoteGone:  # it cannot tell any more
                    self.live.discard(pid)
                    return _gone_code(pid)
            code = self.codes.pop(pid)
            try:  # as after Popen.wait: gone from the process table when this returns
                self.sock.send(pickle.dumps(("reap", pid)))
                while (reply := self._recv(None)) is not None and reply != ("reaped", pid):
                    pass
            except OSError:  # ZygoteGone too
                pass
            self.live.discard(pid)
            if self.retired and not self.live:
                self.close()
            return code

    def retire(self) -> None:
        """Fork no more; end once every rank it forked has been waited for (a World's warm ranks
        may outlive the zygote's turn by many runs)."""
        self.retired = True
        with self.lock:
            if not self.live:
                self.close()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """End the zygote (the ranks it forked are the launches' to end) and reap it."""
        if self.life_w < 0:
            return
        os.close(self.life_w)
        self.life_w = -1
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _gone_code(pid: int) -> int:
    """A rank's status when its zygote ended first (the zygote killed): nobody can read it any
    more (the rank was re-parented and reaped by init); reported as SIGKILLed."""
    return -9


_zygotes: dict[tuple, Zygote] = {}  # by environment, oldest first
_retired: list[Zygote] = []  # replaced, still serving the ranks they forked
_registry_lock = threading.Lock()
#: variables that change on every call and that nothing reads at import: not part of the key
VOLATILE = ("PYTEST_CURRENT_TEST",)  # pytest sets it for each test phase


def enabled() -> bool:
    return (os.environ.get("PARLAB_ZYGOTE", "1") != "0" and hasattr(os, "pidfd_open")
            and hasattr(socket, "send_fds") and sys.platform.startswith("linux"))


def spawn(argv: list[str], pass_fds: list[int], env: dict[str, str]):
    """A rank: forked by this environment's zygote (started on first use), or, where there is
    none (``enabled()`` false, or it failed), ``Popen`` of a fresh interpreter."""
    if enabled():
        key = tuple(sorted((k, v) for k, v in env.items() if k not in VOLATILE))
        try:
            with _registry_lock:
                z = _zygotes.get(key)
                _retired[:] = [r for r in _retired if r.alive()]
                if z is None or not z.alive():
                    if z is not None:
                        z.close()
                    while len(_zygotes) >= MAX_ZYGOTES:
                        _retire(_zygotes.pop(next(iter(_zygotes))))
                    z = _zygotes[key] = Zygote(env)
            return z.spawn(argv, pass_fds, env)
        except ZygoteGone:
            with _registry_lock:
                gone = _zygotes.pop(key, None)
            if gone is not None:
                _retire(gone)
    return subprocess.Popen([sys.executable, "-m", "parlab.comm.worker", *argv], pass_fds=pass_fds,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)


def _retire(z: Zygote) -> None:
    z.retire()
    if z.alive():
        _retired.append(z)


def pids() -> list[int]:
    """The live zygotes' pids (a test's leak check knows them for what they are)."""
    with _registry_lock:
        return [z.proc.pid for z in [*_zygotes.values(), *_retired] if z.alive()]


def shutdown() -> None:
    """End every zygote of this process (the next launch starts one again)."""
    with _registry_lock:
        while _zygotes:
            _zygotes.popitem()[1].close()
        while _retired:
            _retired.pop().close()


# ---------------------------------------------------------------------------------- the zygote
def serve(sock_fd: int, life_fd: int) -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    sock = socket.socket(fileno=sock_fd)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ, "request")
    sel.register(life_fd, selectors.EVENT_READ, "life")
    sock.send(pickle.dumps(("ready", os.getpid())))
    pidfds: dict[int, int] = {}  # pid -> its pidfd, until it has ended
    while True:
        for key, _ in sel.select():
            if key.data == "life":
                os._exit(0)  # the caller is gone; the ranks end by their own lifelines
            if key.data == "request":
                if not _request(sock, sel, life_fd, pidfds):
                    os._exit(0)
                continue
            if isinstance(key.data, int):  # a rank ended: report, keep the zombie until "reap"
                pid = key.data
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if info is None:
                    continue
                sel.unregister(key.fd)
                os.close(pidfds.pop(pid))
                code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
                sock.send(pickle.dumps(("exit", pid, code)))


def _request(sock, sel, life_fd: int, pidfds: dict[int, int]) -> bool:
    """Serve one request; False when the caller has closed the socket."""
    try:
        data, fds, _, _ = socket.recv_fds(sock, _PACKET, _MAX_FDS)
    except OSError:
        return False
    if not data:
        return False
    request = pickle.loads(data)
    if isinstance(request, tuple):  # ("reap", pid): its status was read; free its pid
        try:
            os.waitpid(request[1], os.WNOHANG)  # it has ended: its status was reported
        except ChildProcessError:
            pass
        sock.send(pickle.dumps(("reaped", request[1])))
        return True
    started_r, started_w = os.pipe()  # closed by the child once it leads its own session
    try:
        pid = os.fork()
    except OSError as err:
        os.close(started_r)
        os.close(started_w)
        sock.send(pickle.dumps(("error", f"fork failed: {err}")))
        return True
    if pid == 0:
        _child(request, fds, started_w, [sock.detach(), life_fd, sel.fileno(), started_r, *pidfds.values()])
    os.close(started_w)
    os.read(started_r, 1)  # EOF: it has its own process group (or it died): as Popen returns
    os.close(started_r)  # after the exec, so that killing the group at once kills the rank
    for fd in fds:
        os.close(fd)
    pidfds[pid] = os.pidfd_open(pid)
    sel.register(pidfds[pid], selectors.EVENT_READ, pid)
    sock.send(pickle.dumps(("spawned", pid)))
    return True


def _child(request: dict, fds: list[int], started: int, own: list[int]) -> None:
    """In the forked rank: become what ``Popen(start_new_session=True, pass_fds=...)`` of
    ``python -m parlab.comm.worker`` would have started, then run it. Never returns."""
    try:
        os.setsid()
        os.close(started)
        for fd in own:  # the zygote's socket, lifeline, selector and other ranks' pidfds
            os.close(fd)
        targets = [1, 2, *request["fds"]]  # stdout, stderr, then pass_fds at their numbers
        floor = max([*targets, *fds]) + 1
        moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor) for fd in fds]
        for fd in fds:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, target in zip(moved, targets, strict=True):
            os.dup2(fd, target)  # inheritable, as pass_fds makes them
            os.close(fd)
        keep = sorted({0, *targets})
        for lo, hi in zip(keep, [*keep[1:], os.sysconf("SC_OPEN_MAX")], strict=True):
            os.closerange(lo + 1, hi)  # everything between the kept ones, and above them
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        import numpy as np

        np.random.seed()  # a fresh process's global state is drawn anew; a fork's is the zygote's
        from parlab.comm import worker

        argv = request["argv"]
        sys.argv = [worker.__file__, *argv]
        worker.main(int(argv[0]), int(argv[1]), argv[2])
    except BaseException:  # noqa: BLE001 - report as a crashed interpreter would
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(1)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
