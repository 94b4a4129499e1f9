"""A fork server for ``launch``: ranks forked from a process that has already imported torch.

A cold rank is a fresh interpreter that imports numpy, cloudpickle, parlab.comm and (for the
torch backend, or a function that uses tensors) torch: about 1.7 CPU-seconds per rank, so 4
ranks on a 2-core laptop take 3-8 s to start, more under load. A *zygote* pays that once: a
fresh interpreter (``python -m parlab.comm.zygote``, started like a rank, by ``Popen``) imports
all of it, then forks one rank per request (``zygote_server``); the caller talks to it through
``Zygote`` and sees each rank as a ``ZygoteProcess`` (``zygote_caller``).

One zygote per environment (what the ranks read at import, such as ``OMP_NUM_THREADS``, must
be what the zygote read), at most ``MAX_ZYGOTES`` kept. It ends when the caller ends (a lifeline
pipe, as the ranks have) or at ``shutdown()``. ``PARLAB_ZYGOTE=0`` turns it off; where it cannot
start (no pidfd: not Linux 5.3+), ranks start as fresh interpreters, as before.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

from . import tuning
from .zygote_caller import READY_LIMIT, Zygote, ZygoteGone, ZygoteProcess
from .zygote_server import PRELOAD, serve

__all__ = ["MAX_ZYGOTES", "READY_LIMIT", "PRELOAD", "VOLATILE", "Zygote", "ZygoteGone",
           "ZygoteProcess", "enabled", "pids", "serve", "shutdown", "spawn"]

MAX_ZYGOTES = 2

_zygotes: dict[tuple, Zygote] = {}  # by environment, oldest first
_retired: list[Zygote] = []  # replaced, still serving the ranks they forked
_registry_lock = threading.Lock()
#: variables that change on every call and that nothing reads at import: not part of the key
VOLATILE = ("PYTEST_CURRENT_TEST",)  # pytest sets it for each test phase


def enabled() -> bool:
    return (tuning.read().zygote and hasattr(os, "pidfd_open")
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


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
