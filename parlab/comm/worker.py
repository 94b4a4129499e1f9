"""A launched rank: ``python -m parlab.comm.worker CTRL_FD``, started by ``parlab.comm.launch``.

It reads its job from the control socket (rank, world size, the file descriptors it inherited,
and the user's function pickled *by value* with cloudpickle), builds its communicator, runs
``fn(comm, *args)`` and sends back ``('ok', result)`` or ``('error', ...)`` with the traceback.
A thread watches the launcher: if it dies, so does the worker. torch is imported only by the
torch backend or by the user's own function.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
import threading
import traceback

from .shm import DONE, FINISHING, RUNNING, STARTING, Arena, Status
from .wire import recv_obj, send_obj


def _lifeline(fd: int) -> None:
    """Block on a pipe only the launcher can write to; its end means the launcher is gone."""
    try:
        while os.read(fd, 1):
            pass
    finally:
        os._exit(70)


def _communicator(job: dict, arena: Arena, status: Status):
    rank, n = job["rank"], job["world_size"]
    if job["backend"] == "torch":
        from .torch_backend import TorchCommunicator

        return TorchCommunicator.from_launch(rank, n, job["store"], status, job["t0"], job["timeout"])
    from .engine import Engine
    from .local import LocalCommunicator

    socks = {peer: socket.socket(fileno=fd) for peer, fd in job["peer_fds"].items()}
    engine = Engine(rank, arena, socks, status)
    return LocalCommunicator(rank, range(n), 0, status, job["t0"], engine)


def main(ctrl_fd: int) -> None:
    ctrl = socket.socket(fileno=ctrl_fd)
    job = recv_obj(ctrl)
    if job is None:
        os._exit(71)
    threading.Thread(target=_lifeline, args=(job["lifeline"],), daemon=True).start()
    sys.path[:] = job["sys_path"]
    arena = Arena(job["arena_fd"], job["world_size"], job["capacity"])
    status = Status(arena.status[job["rank"]])
    status.set(STARTING)
    try:
        comm = _communicator(job, arena, status)
        fn, args = pickle.loads(job["payload"])
        status.set(RUNNING)
        result = fn(comm, *args)
        status.set(FINISHING)
        comm.close()
        import cloudpickle

        try:
            reply = ("ok", cloudpickle.dumps(result))
        except Exception as err:
            raise TypeError(f"rank {job['rank']}'s result cannot travel back to the caller "
                            f"(return arrays, numbers, plain objects): {err}") from None
    except BaseException as err:  # noqa: BLE001 - everything goes back to the caller
        reply = ("error", type(err).__name__, str(err), traceback.format_exc(), _pickled(err))
    status.set(DONE)
    sys.stdout.flush()
    sys.stderr.flush()
    send_obj(ctrl, reply)
    os._exit(0)  # skip interpreter teardown (and torch's): the launcher has all it needs


def _pickled(err: BaseException) -> bytes | None:
    try:
        data = pickle.dumps(err)
        pickle.loads(data)
        return data
    except Exception:  # noqa: BLE001 - an exception that cannot travel is described by text
        return None


if __name__ == "__main__":
    main(int(sys.argv[1]))
