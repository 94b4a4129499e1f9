"""Start a command under ``torchrun`` and leave nothing behind: torchrun's log directory (by
default a ``torchelastic_*`` directory it makes in the system temp dir and never removes) and
its workers' temporary files go to one temporary directory of ours, removed when it ends.

    from parlab.comm.torchrun import run_torchrun

    done = run_torchrun(["-m", "parlab.train", "--dp", "2", "--steps", "2"], 2, timeout=300)
    done.returncode, done.stdout, done.stderr          # a subprocess.CompletedProcess

Importing this module never imports torch (torchrun runs as ``python -m torch.distributed.run``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence

RENDEZVOUS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
              "GROUP_RANK", "TORCHELASTIC_RUN_ID")


def run_torchrun(command: Sequence[str], nproc: int, *, env: Mapping[str, str] | None = None,
                 timeout: float | None = None, cwd: str | os.PathLike | None = None,
                 torchrun_args: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """Run ``torchrun --standalone --nproc_per_node=nproc [torchrun_args] --log-dir D command``
    (``command``: a script and its arguments, or ``["-m", module, ...]``) with ``TMPDIR=D``, where
    ``D`` is a fresh temporary directory under ``env``'s TMPDIR (else the system's), removed when
    torchrun ends; on a timeout (``subprocess.TimeoutExpired``) or an interrupt torchrun and its
    workers are killed first. ``env``: the workers' environment (default: this process's),
    less any rendezvous variables of an outer torchrun. Output is captured as text."""
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"nproc must be a positive integer, got {nproc!r}")
    if isinstance(command, str) or not command:
        raise ValueError(f"command must be a non-empty list of strings, got {command!r}")
    env = {k: v for k, v in (os.environ if env is None else env).items() if k not in RENDEZVOUS}
    with tempfile.TemporaryDirectory(prefix="parlab-torchrun-", dir=env.get("TMPDIR")) as tmp:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={nproc}", *torchrun_args, "--log-dir", os.path.join(tmp, "logs"),
               *command]
        proc = subprocess.Popen(cmd, env={**env, "TMPDIR": tmp}, cwd=cwd, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)  # its workers: one group to stop
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:  # a timeout, Ctrl-C: torchrun and every worker go
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
