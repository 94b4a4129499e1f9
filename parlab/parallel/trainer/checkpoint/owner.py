"""One run owns a checkpoint directory: a lock (``flock`` on ``directory/LOCK``) held for the
run's life, and a run id (in every shard and every manifest) that a resume takes over.

    lock = DirectoryLock(directory).acquire()   # CheckpointError if another run holds it
    ...
    lock.release()                              # also on exit, or when the process is killed

The lock is the kernel's (``flock(2)``): released when its holder exits, even by SIGKILL, so a
killed run never leaves a stale lock behind. A run that saves (``write``) takes it exclusively
and writes its pid, host and run id into it; a run that only reads (a resume without saving)
shares it with other readers and writes nothing, so a read-only checkpoint (a published one)
can be resumed: without a ``LOCK`` it cannot create, such a run holds none (nobody can write
there to need one). ``LOCK`` is opened safely: never through a symbolic link (``O_NOFOLLOW``),
never blocking on a FIFO (``O_NONBLOCK``), never truncated on open, and refused unless it is a
plain file with one link (a hard link to another file, as ``cp -al`` makes, would be written
through and would share the other directory's lock). ``check_directory`` is what a run checks
before it starts: a directory (not a file), with no ``step-*`` entry that is a link or a plain file.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import stat
import time
import uuid
from pathlib import Path

from .files import MANIFEST, PARTIAL, STEP, CheckpointError, complete_steps, read_json, step_dir

LOCK = "LOCK"
READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)
KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
         (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def new_run_id() -> str:
    return uuid.uuid4().hex


class DirectoryLock:
    """The lock of a checkpoint directory (``LOCK``, created if missing): exclusive for a run
    that saves (``write``), shared by runs that only read."""

    def __init__(self, directory: str | os.PathLike, write: bool = True):
        self.directory = Path(directory)
        self.path = self.directory / LOCK
        self.write = write
        self.fd: int | None = None

    def holder(self) -> str:
        """Who holds it, as its file says ('pid 123 on host, run <id>'), or 'unknown'."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as f:
                info = json.loads(f.read(4096) or b"{}")
            return f"pid {info['pid']} on {info['host']}, run {info['run']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "unknown"

    def _refuse(self, err: OSError | None = None, info: os.stat_result | None = None) -> CheckpointError:
        """One line for a ``LOCK`` that is not a plain file of one link (``err``: it would not open)."""
        if info is None:
            try:
                info = os.lstat(self.path)
            except OSError:
                return CheckpointError(f"checkpoint lock {self.path} cannot be opened "
                                       f"({os.strerror(err.errno)}): refusing to start (remove it)")
        if stat.S_ISREG(info.st_mode):
            return CheckpointError(f"checkpoint lock {self.path} has {info.st_nlink} hard links: it is "
                                   f"also another file (cp -al shares the lock, and the run, of the "
                                   f"directory it copied): refusing to lock or write through it "
                                   f"(remove it; a run makes a new one)")
        what = next((name for test, name in KINDS if test(info.st_mode)), "not a plain file")
        return CheckpointError(f"checkpoint lock {self.path} is {what}, not the plain file a run "
                               f"creates: refusing to lock or write through it (remove it)")

    def _read_only(self, code: int) -> CheckpointError:
        return CheckpointError(f"checkpoint directory {self.directory} cannot be written "
                               f"({os.strerror(code)}): this run saves checkpoints into it "
                               f"(save_every > 0, --save-every); a resume that does not save can "
                               f"read a read-only checkpoint")

    def _open(self) -> int | None:
        """``LOCK``'s descriptor, created if missing; a reader in a directory it cannot write
        opens it read-only (None: there is none to open)."""
        flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags | os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            if err.errno not in READ_ONLY:
                raise self._refuse(err) from None
            if self.write:
                raise self._read_only(err.errno) from None
            try:
                fd = os.open(self.path, flags | os.O_RDONLY)
            except FileNotFoundError:
                return None
            except OSError as again:
                raise self._refuse(again) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(fd)
            raise self._refuse(info=info)
        return fd

    def acquire(self, run: str | None = None, wait: float = 0.0) -> DirectoryLock:
        """Take the lock, retrying for up to ``wait`` seconds (another run's ``probe`` holds it
        for microseconds); CheckpointError naming the holder if it stays taken."""
        check_directory(self.directory)
        if self.write:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise self._read_only(err.errno) from None
            if not os.access(self.directory, os.W_OK):  # a LOCK it may write, in a directory it may not
                raise self._read_only(errno.EACCES)
        fd = self._open()
        deadline = time.monotonic() + wait
        while fd is not None:
            try:
                fcntl.flock(fd, (fcntl.LOCK_EX if self.write else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                who = self._who(fd)
                os.close(fd)
                raise CheckpointError(f"checkpoint directory {self.directory} is in use by another "
                                      f"run ({who}; lock {self.path}): one directory, one "
                                      f"run at a time") from None
        self.fd = fd
        self.note(run)
        return self

    def _who(self, fd: int) -> str:
        """The holder of a lock this run could not take: a saving run (its note), or runs that
        only read (they hold it shared, and write no note)."""
        if self.write:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return "a resume that does not save: it reads the directory"
            except BlockingIOError:
                pass
        return self.holder()

    def note(self, run: str | None) -> None:
        """A saving run writes its pid, host and run id into the lock file (for the error above)."""
        if self.write and self.fd is not None:
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


def probe(directory: str | os.PathLike, write: bool = True) -> None:
    """Refuse (CheckpointError) a directory another run holds, or one a run that saves
    (``write``) cannot write; take and drop the lock at once."""
    if write or Path(directory).is_dir():
        DirectoryLock(directory, write).acquire().release()


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
    """One line for a failed write: a full disk says ENOSPC (told by the errno or, where a writer
    hides it as torch.save does in 'enforce fail at inline_container.cc', by the free space) and
    that the earlier complete checkpoints are untouched."""
    full = getattr(err, "errno", None) == errno.ENOSPC or "No space left" in str(err)
    if not full:
        try:
            full = shutil.disk_usage(where).free < 1 << 20
        except OSError:
            pass
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
