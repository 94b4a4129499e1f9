"""One run owns a checkpoint directory: an exclusive lock (``flock`` on ``directory/LOCK``) held
for the run's life, and a run id (in every shard and every manifest) that a resume takes over.

    lock = DirectoryLock(directory).acquire()   # CheckpointError if another run holds it
    ...
    lock.release()                              # also on exit, or when the process is killed

The lock is the kernel's (``flock(2)``): released when its holder exits, even by SIGKILL, so a
killed run never leaves a stale lock behind. ``check_directory`` is what a run checks before it
starts: a directory (not a file), with no ``step-*`` entry that is a link or a plain file.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import time
import uuid
from pathlib import Path

from .files import MANIFEST, PARTIAL, STEP, CheckpointError, read_json

LOCK = "LOCK"


def new_run_id() -> str:
    return uuid.uuid4().hex


class DirectoryLock:
    """The exclusive lock of a checkpoint directory (created if missing)."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.path = self.directory / LOCK
        self.fd: int | None = None

    def holder(self) -> str:
        """Who holds it, as its file says ('pid 123 on host, run <id>'), or 'unknown'."""
        try:
            info = json.loads(self.path.read_text() or "{}")
            return f"pid {info['pid']} on {info['host']}, run {info['run']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "unknown"

    def acquire(self, run: str | None = None, wait: float = 0.0) -> DirectoryLock:
        """Take the lock, retrying for up to ``wait`` seconds (another run's ``probe`` holds it
        for microseconds); CheckpointError naming the holder if it stays taken."""
        check_directory(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                os.close(fd)
                raise CheckpointError(f"checkpoint directory {self.directory} is in use by another "
                                      f"run ({self.holder()}; lock {self.path}): one directory, one "
                                      f"run at a time") from None
        self.fd = fd
        self.note(run)
        return self

    def note(self, run: str | None) -> None:
        """Write the holder's pid, host and run id into the lock file (for the error above)."""
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                       "run": run}).encode(), 0)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None

    def __enter__(self) -> DirectoryLock:
        return self if self.fd is not None else self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def probe(directory: str | os.PathLike) -> None:
    """Refuse (CheckpointError) a directory another run holds; take and drop the lock at once."""
    if Path(directory).is_dir():
        DirectoryLock(directory).acquire().release()


def check_directory(directory: str | os.PathLike) -> None:
    """A checkpoint directory is a directory (or not there yet) whose ``step-*`` entries are real
    directories: a link or a file in their place is an error naming it."""
    d = Path(directory)
    if str(directory).strip() == "":
        raise CheckpointError("the checkpoint directory must be a path, got '' (the current "
                              "directory is no place for checkpoints)")
    if d.exists() and not d.is_dir():
        raise CheckpointError(f"checkpoint directory {d} is a file, not a directory")
    if not d.is_dir():
        return
    for p in d.iterdir():
        name = p.name.removesuffix(PARTIAL)
        if STEP.match(name) and (p.is_symlink() or not p.is_dir()):
            kind = "a symbolic link" if p.is_symlink() else "a file"
            raise CheckpointError(f"checkpoint entry {p} is {kind}, not a directory a run wrote: "
                                  f"refusing to load, delete or write through it (remove it)")


# ---------------------------------------------------------------------------- writing entries
def write_error(err: BaseException, where: Path, directory: str | os.PathLike) -> CheckpointError:
    """One line for a failed write: a full disk says ENOSPC (torch's writer hides the errno in
    'enforce fail at inline_container.cc': then the free space tells) and that the earlier
    complete checkpoints are untouched."""
    full = getattr(err, "errno", None) == errno.ENOSPC or "No space left" in str(err)
    if not full:
        try:
            full = shutil.disk_usage(where).free < 1 << 20
        except OSError:
            pass
    from .runs import complete_steps, step_dir

    steps = complete_steps(directory)
    kept = f"the earlier checkpoint {step_dir(directory, steps[-1])} is intact" if steps else \
        "no earlier checkpoint was touched"
    if full:
        return CheckpointError(f"checkpoint {where} could not be written: no space left on device "
                               f"(ENOSPC); {kept} (this one stays {PARTIAL}, never loaded): free "
                               f"space and resume")
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return CheckpointError(f"checkpoint {where} could not be written ({type(err).__name__}: "
                           f"{first}); {kept}")


def _fresh_partial(partial: Path) -> None:
    """Make ``step-N.partial`` empty: a leftover of a run that died while writing it is removed
    (this run holds the directory's lock), a link in its place is refused."""
    if partial.is_symlink() or (partial.exists() and not partial.is_dir()):
        raise CheckpointError(f"checkpoint entry {partial} is a symbolic link or a file, not a "
                              f"directory a run wrote: refusing to delete or write through it "
                              f"(remove it)")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir()


def _replace_final(final: Path, run: str) -> None:
    """Before the rename: a complete ``step-N`` already there must be this run's (then it goes)."""
    if final.is_symlink() or (final.exists() and not final.is_dir()):
        raise CheckpointError(f"checkpoint entry {final} is a symbolic link or a file: refusing "
                              f"to replace it (remove it)")
    if final.exists():
        theirs = read_json(final / MANIFEST).get("run")
        if theirs != run:
            raise CheckpointError(f"checkpoint {final} belongs to run {theirs}, not to this run "
                                  f"{run}: refusing to replace another run's checkpoint")
        shutil.rmtree(final)
