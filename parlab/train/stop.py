"""How a ``python -m parlab.train`` run ends early, and what it says then.

- A torchrun worker dies with its agent (``die_with_parent``): ``kill -9`` of torchrun would
  otherwise leave every worker training, checkpointing and holding the directory's lock.
- Ctrl-C (or torchrun's SIGTERM after it) and a run that stops itself (a non-finite loss, a log
  that cannot be written) end in one line naming the last complete checkpoint and the command
  that resumes from it (``stop_line``), not in a traceback per rank.
- A rank other than 0 that refused its arguments waits for torchrun's stop
  (``wait_for_torchrun_stop``), so that rank 0's line is the one torchrun reports.

Plain Python: nothing here imports torch.
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

STARTED_BY = os.getppid()  # read at import, the earliest moment: torchrun's agent, normally
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
INTERRUPTED = 130  # the shell's status for a command ended by SIGINT (128 + 2)


def die_with_parent(parent: int = STARTED_BY) -> bool:
    """Have the kernel SIGKILL this process when the thread that started it ends (Linux
    ``prctl(PR_SET_PDEATHSIG)``, prctl(2)); if ``parent`` is already gone (this process was
    re-parented before the call: the race prctl(2) warns of), exit now. False where the
    platform has no prctl (nothing is set)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    if os.getppid() != parent:
        os._exit(1)  # the agent died before prctl: nobody is left to read a message
    return True


class StopSignals:
    """Ctrl-C's SIGINT and torchrun's SIGTERM (its agent, on Ctrl-C, sends its workers SIGTERM,
    which would end rank 0 before its line): each raises KeyboardInterrupt and is remembered
    (``fired``, ``wait``), so a peer's lost connection can be told apart from a failure."""

    def __init__(self) -> None:
        self.event = threading.Event()

    @property
    def fired(self) -> bool:
        return self.event.is_set()

    def wait(self, seconds: float) -> bool:
        """Whether a signal arrives within ``seconds`` (if it does, its KeyboardInterrupt)."""
        return self.event.wait(seconds)

    def handler(self, signum, frame) -> None:
        self.event.set()
        raise KeyboardInterrupt


@contextlib.contextmanager
def signals_as_interrupt(*signums: int) -> Iterator[StopSignals]:
    """While inside, each of ``signums`` (default SIGTERM and SIGINT; one that is ignored
    stays ignored) raises KeyboardInterrupt in the main thread, remembered in the
    ``StopSignals`` yielded; the old handlers after. ``make lab`` stops its server this way
    on SIGTERM and SIGHUP as on Ctrl-C."""
    signals = StopSignals()
    names = signums or (signal.SIGTERM, signal.SIGINT)
    old = {n: signal.getsignal(n) for n in names}
    try:
        for n in names:
            if old[n] is not signal.SIG_IGN:
                signal.signal(n, signals.handler)
        yield signals
    finally:
        for n, h in old.items():
            signal.signal(n, h)


def wait_for_torchrun_stop(timeout: float) -> None:
    """Another rank than 0 that refused its arguments waits for torchrun's SIGTERM (sent once
    rank 0 has said why and exited), or ``timeout`` seconds (at most 60; 60 where ``timeout``
    is itself the refused value: NaN, negative): exiting first, it would be torchrun's first
    failure, and torchrun's SIGTERM could stop rank 0 before its line."""
    limit = min(timeout, 60.0) if math.isfinite(timeout) and timeout > 0 else 60.0
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    signal.sigtimedwait({signal.SIGTERM}, limit)


def resume_command(argv: Sequence[str], torchrun: bool) -> str:
    """The command that resumes this run: the same arguments and ``--resume``."""
    args = list(argv) + ["--resume"] * ("--resume" not in argv)
    if torchrun:
        return "the same torchrun command with --resume"
    return shlex.join([os.path.basename(sys.executable), "-m", "parlab.train", *args])


def last_checkpoint(directory: str | None) -> int | None:
    """The step of the latest complete checkpoint in ``directory`` (None: none, or no directory)."""
    if directory is None:
        return None
    from parlab.parallel.trainer.checkpoint.files import complete_steps

    steps = complete_steps(directory)
    return steps[-1] if steps else None


def stop_line(reason: str, directory: str | None, argv: Sequence[str], torchrun: bool) -> str:
    """``reason``, then where the run can go on from: the last complete checkpoint and the
    command that resumes it, or that no checkpoint was written."""
    step = last_checkpoint(directory)
    if step is None:
        how = ("--checkpoint-dir DIR --save-every K saves some" if directory is None else
               f"none complete in {directory}")
        return f"{reason}; no checkpoint was written ({how})"
    return (f"{reason}; the last complete checkpoint is step {step} in {directory}; resume with: "
            f"{resume_command(argv, torchrun)}")
