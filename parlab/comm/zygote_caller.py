"""The caller's side of one zygote (``zygote.py``): start it, ask it to fork a rank, read each
rank's exit status, end it; and ``ZygoteProcess``, what ``launch`` uses of ``Popen`` for a rank it
forked.

A rank is the zygote's child, not the caller's, so the zygote reports its end: it watches each
rank's pidfd, reads the exit status *without reaping* (``waitid(WNOWAIT)``) and sends it; the
rank stays a zombie, its pid reserved, until the caller has seen the status and asks for the
reap, as ``Popen.wait`` would (pidfd_open(2), Linux 5.3+).
"""

from __future__ import annotations

import os
import pickle
import select
import socket
import subprocess
import sys
import threading

from .zygote_server import PACKET

READY_LIMIT = 120.0  # seconds the zygote may take to import (as a rank may to start)


class ZygoteGone(OSError):
    """The zygote ended or did not start: the caller starts its ranks as fresh interpreters."""


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
    """One zygote process, from the caller's side (module docstring)."""

    def __init__(self, env: dict[str, str]):
        self.env = dict(env)  # what it started with: a request carries only what differs
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
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
                cwd=_existing_cwd())
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
            data = self.sock.recv(PACKET)
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
        """Fork ``python -m parlab.comm.worker argv...`` with ``pass_fds`` at their numbers, in
        this process's working directory (sent as a descriptor: it may have been deleted or
        renamed, as a Popen'ed child inherits it anyway) and ``env``, sent as what differs from
        the zygote's own environment (a request is one datagram: an environment of hundreds of
        KB would not fit, EMSGSIZE)."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        cwd = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with self.lock:
                request = {"argv": argv, "fds": list(pass_fds),
                           "env": {k: v for k, v in env.items() if self.env.get(k) != v},
                           "unset": [k for k in self.env if k not in env]}
                try:
                    socket.send_fds(self.sock, [pickle.dumps(request)], [out_w, err_w, *pass_fds, cwd])
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
            os.close(cwd)
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


def _existing_cwd() -> str | None:
    """Where the zygote starts: here (None), unless this directory has been deleted, where
    importing torch fails (oneMKL cannot load its libraries): then "/" (each rank it forks
    moves to its caller's directory anyway, deleted or not)."""
    try:
        os.getcwd()
    except FileNotFoundError:
        return "/"
    return None


def _gone_code(pid: int) -> int:
    """A rank's status when its zygote ended first (the zygote killed): nobody can read it any
    more (the rank was re-parented and reaped by init); reported as SIGKILLed."""
    return -9

