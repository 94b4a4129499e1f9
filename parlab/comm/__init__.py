"""Real collectives on CPU processes: ``launch`` runs ``fn(comm, *args)`` on N ranks.

    from parlab.comm import launch

    def work(comm, n):
        x = np.full(n, comm.rank, np.float32)
        return comm.all_reduce(x)               # numpy in, numpy out (torch in, torch out)

    launch(work, 4, 1000)                       # backend="local": shared memory, home-made
    launch(work, 4, 1000, backend="torch")      # torch.distributed with gloo

    with World(4) as world:                     # warm ranks: many functions, no restarts
        world.run(work, 1000)
        world.run(work, 2000)

    work = comm.all_reduce(x, async_op=True)    # a Work: compute meanwhile, then work.wait()

The communicator (``communicator.py``) offers send/recv (and the fused recv_reduce,
recv_reduce_send, recv_copy_send), broadcast, reduce, all_reduce, all_gather, reduce_scatter,
gather, scatter, all_to_all, barrier, sub-groups (``new_group``, ``split``), and counts every
byte it moves (``traffic()``, ``recording()``). The modules, one job each:

    launch.py         start the ranks, watch them, report failures, clean up
    world.py          World: a warm set of ranks that runs many functions
    progress.py       async_op=True: the rank's communication thread and its Work handles
    worker.py         one rank's process: build its communicator, run fn, send the result back
    communicator.py   the interface and its semantics, argument checks, signatures, accounting
    algorithms.py     ring, trees, recursive doubling, naive: written once against send/recv
    local.py          the local backend's communicator, on engine.py (shared-memory rings)
    torch_backend.py  the same interface over torch.distributed (gloo, NCCL), torchrun helper
    message.py        the header and signature every message carries
    arrays.py         numpy / torch arrays as bytes, and in-place reductions
    shm.py            the anonymous shared arena and the status table the watchdog reads

POSIX only (Linux, macOS). Importing this package never imports torch.
"""

from .accounting import Event, Traffic
from .communicator import Communicator
from .errors import (
    CollectiveMismatch,
    CommError,
    CommTimeout,
    PeerGone,
    RankDied,
    RankError,
    UnreceivedMessage,
)
from .launch import launch
from .progress import Work
from .world import World

__all__ = ["launch", "World", "Work", "Communicator", "Traffic", "Event", "CommError", "RankError", "RankDied",
           "CommTimeout", "CollectiveMismatch", "PeerGone", "UnreceivedMessage", "from_torchrun"]


def from_torchrun(backend: str | None = None, timeout: float = 600.0) -> Communicator:
    """The communicator of a process started by ``torchrun`` (reads RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT); gloo on CPU, NCCL when CUDA is available."""
    from .torch_backend import TorchCommunicator

    return TorchCommunicator.from_env(backend, timeout)
