"""A launched rank: ``python -m parlab.comm.worker CTRL_FD LIFELINE_FD STORE_DIR``, started by
``parlab.comm.launch``.

It reads its job from the control socket (rank, world size, the file descriptors it inherited,
and the user's function pickled *by value* with cloudpickle), builds its communicator, runs
``fn(comm, *args)`` and sends back ``('ok', result)`` or ``('error', ...)`` with the traceback.
torch is imported only by the torch backend or by the user's own function.

Nothing outlives it. It is a subreaper, and before it reports (or exits for any other reason)
it kills every process the function started (``reaper.end_descendants``). A thread watches
the launcher through the lifeline pipe: if the launcher dies (even by SIGKILL), the worker
removes the launch's store directory (torch backend; ``-`` when there is none), ends its
descendants and exits. The descriptors it inherited are made non-inheritable at once, so a
helper the function starts holds none of them (a held control socket would hide its death).
"""

from __future__ import annotations

import os
import pickle
import shutil
import socket
import sys
import threading
import traceback

from . import reaper
from .shm import DONE, FINISHING, RUNNING, STARTING, Arena, Status
from .wire import recv_obj, send_obj


def _lifeline(fd: int, store_dir: str) -> None:
    """Block on a pipe only the launcher can write to; its end means the launcher is gone."""
    try:
        while os.read(fd, 1):
            pass
    finally:
        _abandon(store_dir, 70)


def _abandon(store_dir: str, code: int) -> None:
    """The launcher is gone: leave nothing of the launch behind, and exit."""
    try:
        if store_dir != "-":
            shutil.rmtree(store_dir, ignore_errors=True)
        reaper.end_descendants()
    finally:
        os._exit(code)


def _communicator(job: dict, arena: Arena, status: Status):
    rank, n = job["rank"], job["world_size"]
    if job["backend"] == "torch":
        from .torch_backend import TorchCommunicator

        return TorchCommunicator.from_launch(rank, n, job["store"], status, job["t0"], job["timeout"],
                                             arena)
    from .engine import Engine
    from .local import LocalCommunicator

    socks = {peer: socket.socket(fileno=fd) for peer, fd in job["peer_fds"].items()}
    engine = Engine(rank, arena, socks, status)
    return LocalCommunicator(rank, range(n), 0, status, job["t0"], engine)


def main(ctrl_fd: int, lifeline_fd: int, store_dir: str) -> None:
    reaper.become_subreaper()
    for fd in (ctrl_fd, lifeline_fd):
        os.set_inheritable(fd, False)
    threading.Thread(target=_lifeline, args=(lifeline_fd, store_dir), daemon=True).start()
    ctrl = socket.socket(fileno=ctrl_fd)
    job = recv_obj(ctrl)
    if job is None:
        _abandon(store_dir, 71)
    for fd in (job["arena_fd"], *job["peer_fds"].values()):
        os.set_inheritable(fd, False)
    sys.path[:] = job["sys_path"]
    arena = Arena(job["arena_fd"], job["world_size"], job["capacity"])
    status = Status(arena.status[job["rank"]])
    status.set(STARTING)
    if job.get("warm"):
        _serve(ctrl, job, arena, status, store_dir)
        return
    try:
        comm = _communicator(job, arena, status)
        fn, args = pickle.loads(job["payload"])
        status.set(RUNNING)
        result = fn(comm, *args)
        comm._drain_async()  # its queued operations first: until they ran it has not returned
        status.set(FINISHING)
        comm.close()
        reply = _result(job, result)
    except BaseException as err:  # noqa: BLE001 - everything goes back to the caller
        reply = _failure(err)
    reaper.end_descendants()  # helpers the function started end with it (issue 8 item 4)
    status.set(DONE)
    sys.stdout.flush()
    sys.stderr.flush()
    send_obj(ctrl, reply)
    _await_release(ctrl, store_dir)


def _result(job: dict, result) -> tuple:
    import cloudpickle

    try:
        return ("ok", cloudpickle.dumps(result))
    except Exception as err:
        raise TypeError(f"rank {job['rank']}'s result cannot travel back to the caller "
                        f"(return arrays, numbers, plain objects): {err}") from None


def _failure(err: BaseException) -> tuple:
    return ("error", type(err).__name__, str(err), traceback.format_exc(), _pickled(err))


def _serve(ctrl: socket.socket, job: dict, arena: Arena, status: Status, store_dir: str) -> None:
    """A rank of a warm ``World``: set up the backend once (the engine's links, or torch's
    process group), then run one function per ``("run", payload)`` message, each on a fresh
    communicator (sequence numbers, traffic, sub-groups start anew). After a failure the rank
    only waits to be ended: the World replaces the whole set."""
    try:
        base = _communicator(job, arena, status)
        reply = ("ok", pickle.dumps(None))  # ready
    except BaseException as err:  # noqa: BLE001
        base, reply = None, _failure(err)
    status.set(DONE)
    send_obj(ctrl, reply)
    while base is not None:
        msg = recv_obj(ctrl)
        if msg is None:
            break
        try:
            fn, args = pickle.loads(msg[1])
            comm = base.fresh()
            status.set(RUNNING)
            result = fn(comm, *args)
            comm._drain_async()
            status.set(FINISHING)
            comm.end_run()
            comm._progress.close()  # its communication thread ends with the run
            reply = _result(job, result)
        except BaseException as err:  # noqa: BLE001 - everything goes back to the caller
            reply, base = _failure(err), None
        reaper.end_descendants()
        status.set(DONE)
        sys.stdout.flush()
        sys.stderr.flush()
        send_obj(ctrl, reply)
    _await_release(ctrl, store_dir)


def _await_release(ctrl: socket.socket, store_dir: str) -> None:
    """Stay, connections open, until the launcher has every rank's result (it then closes the
    socket or kills this process): a rank that exits at once takes its connections down while
    others may still receive on them (gloo resets them, and a message in flight is lost). Then
    exit without interpreter teardown (and torch's): the launcher has all it needs. (If the
    launcher died meanwhile, the store directory goes with this rank, as in _abandon.)"""
    try:
        ctrl.recv(1)
    finally:
        _abandon(store_dir, 0)


def _pickled(err: BaseException) -> bytes | None:
    try:
        data = pickle.dumps(err)
        pickle.loads(data)
        return data
    except Exception:  # noqa: BLE001 - an exception that cannot travel is described by text
        return None


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
