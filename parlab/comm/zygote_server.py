"""The zygote process itself (``python -m parlab.comm.zygote``): import what the ranks need once,
then fork one rank per request, each made what ``Popen`` would have made: its own session and
process group, exactly the inherited descriptors it was given (at the same numbers), stdin on
/dev/null and stdout/stderr on the caller's pipes, the caller's environment and working
directory, then ``parlab.comm.worker.main`` as ``-m`` would run it. (Android starts apps this way,
and CPython's ``forkserver`` start method workers.)

Why a fork is safe here: the zygote has one thread (it imports, it never computes: torch's and
OpenMP's thread pools start at a first operation, and the ranks get ``OMP_NUM_THREADS``), so no
lock is held by a thread the child lacks. What a fork would share and a fresh process would not
is made fresh in the child: numpy's global random state is reseeded (``random`` reseeds
itself), the zygote's own descriptors are closed. It reports each rank's end to the caller
without reaping it (``waitid(WNOWAIT)``), and reaps on request.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import selectors
import socket
import sys

#: what the ranks import, once (a rank still imports anything else it needs, as a fresh one
#: would; what the zygote imported is the code as it was when the zygote started)
PRELOAD = ("numpy", "cloudpickle", "torch", "torch.distributed", "parlab.comm.worker",
           "parlab.comm.engine", "parlab.comm.local", "parlab.comm.torch_backend", "parlab.parallel",
           "parlab.costmodel")
PACKET = 1 << 20  # bytes of one request or reply (an environment and a few numbers)
_MAX_FDS = 64


def serve(sock_fd: int, life_fd: int) -> None:
    """The zygote's loop: import ``PRELOAD``, say it is ready, then fork and reap on request and
    report each rank's end, until the caller's socket or lifeline closes."""
    import importlib

    env = dict(os.environ)  # as the caller started it (before an import could change it)
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
                if not _request(sock, sel, life_fd, pidfds, env):
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


def _request(sock, sel, life_fd: int, pidfds: dict[int, int], env: dict[str, str]) -> bool:
    """Serve one request; False when the caller has closed the socket."""
    try:
        data, fds, _, _ = socket.recv_fds(sock, PACKET, _MAX_FDS)
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
        _child(request, fds, started_w, [sock.detach(), life_fd, sel.fileno(), started_r, *pidfds.values()],
               env)
    os.close(started_w)
    os.read(started_r, 1)  # EOF: it has its own process group (or it died): as Popen returns
    os.close(started_r)  # after the exec, so that killing the group at once kills the rank
    for fd in fds:
        os.close(fd)
    pidfds[pid] = os.pidfd_open(pid)
    sel.register(pidfds[pid], selectors.EVENT_READ, pid)
    sock.send(pickle.dumps(("spawned", pid)))
    return True


def _child(request: dict, fds: list[int], started: int, own: list[int], env: dict[str, str]) -> None:
    """In the forked rank: become what ``Popen(start_new_session=True, pass_fds=...)`` of
    ``python -m parlab.comm.worker`` would have started, then run it. Never returns. ``fds``:
    stdout, stderr, the pass_fds, then the caller's working directory; ``env``: the zygote's
    environment at start, which the request's ``env`` and ``unset`` update to the caller's."""
    try:
        os.setsid()
        os.close(started)
        cwd, fds = fds[-1], fds[:-1]
        os.fchdir(cwd)
        os.close(cwd)
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
        os.environ.update(env)
        for name in request["unset"]:
            os.environ.pop(name, None)
        os.environ.update(request["env"])
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

