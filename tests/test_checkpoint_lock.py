"""The lock of a checkpoint directory (``parlab.parallel.trainer.checkpoint.owner``): a run that
saves holds ``LOCK`` exclusively, runs that only read share it, and a read-only checkpoint (a
published one) resumes without saving; a ``LOCK`` that is a symbolic link (dangling or not), a
directory, a FIFO or a hard link to another file is refused in one line naming it, and nothing is
written through it. One process, no rank started: the resume of a read-only checkpoint by a real
run is in tests/test_checkpoint.py.

A read-only filesystem is simulated (``ReadOnly``: every open for writing and every mkdir under
the directory fails with EROFS, as on a read-only mount), since root writes through permissions.
"""

from __future__ import annotations

import errno
import os
import pickle
import re

import pytest

from parlab.parallel.trainer.checkpoint import CheckpointError, DirectoryLock, probe
from parlab.train import main

WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class ReadOnly:
    """``with ReadOnly(d):`` ``d`` as on a read-only mount: ``os.open`` for writing or creating
    and ``os.mkdir`` under it fail with EROFS (``pathlib`` goes through both)."""

    def __init__(self, directory):
        self.root = os.path.abspath(os.fspath(directory))

    def _mine(self, path) -> bool:
        path = os.path.abspath(os.fspath(path))
        return path == self.root or path.startswith(self.root + os.sep)

    def __enter__(self):
        self.open, self.mkdir = os.open, os.mkdir

        def ro_open(path, flags, *args, **kwargs):
            if self._mine(path) and flags & WRITES:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
            return self.open(path, flags, *args, **kwargs)

        def ro_mkdir(path, *args, **kwargs):
            if self._mine(path):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
            return self.mkdir(path, *args, **kwargs)

        os.open, os.mkdir = ro_open, ro_mkdir
        return self

    def __exit__(self, *exc):
        os.open, os.mkdir = self.open, self.mkdir


class Planted:
    """A pickle that creates the file ``marker`` when it is loaded (what a forger plants)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def one_line(err: CheckpointError) -> str:
    assert "\n" not in str(err)
    return str(err)


# ------------------------------------------------------------------ odd LOCK entries
def symlink_to_file(d):
    (d.parent / "precious").write_text("keep")
    (d / "LOCK").symlink_to(d.parent / "precious")


def hard_link(d):
    (d.parent / "precious").write_text("keep")
    os.link(d.parent / "precious", d / "LOCK")


@pytest.mark.parametrize("make, what", [
    (symlink_to_file, "is a symbolic link"),
    (lambda d: (d / "LOCK").symlink_to(d / "nowhere"), "is a symbolic link"),
    (lambda d: (d / "LOCK").mkdir(), "is a directory"),
    (lambda d: os.mkfifo(d / "LOCK"), "is a FIFO"),
    (hard_link, "has 2 hard links"),
])
@pytest.mark.parametrize("write", [True, False])
def test_an_odd_lock_entry_is_refused_in_one_line_and_nothing_is_written_through_it(
        tmp_path, make, what, write):
    d = tmp_path / "ck"
    d.mkdir()
    make(d)
    with pytest.raises(CheckpointError) as err:  # a FIFO: refused, not waited on
        DirectoryLock(d, write).acquire()
    assert f"checkpoint lock {d / 'LOCK'} {what}" in one_line(err.value) and "remove it" in str(err.value)
    assert not (d / "nowhere").exists()  # a dangling link is not followed to create its target
    if (tmp_path / "precious").exists():
        assert (tmp_path / "precious").read_text() == "keep"


def test_a_copy_made_with_cp_al_is_told_apart_from_a_run_holding_the_directory(tmp_path):
    ck, snap = tmp_path / "ck", tmp_path / "snap"
    ck.mkdir()
    snap.mkdir()
    with DirectoryLock(ck).acquire(run="a" * 32):  # ck trains
        os.link(ck / "LOCK", snap / "LOCK")        # cp -al ck snap
        with pytest.raises(CheckpointError, match=f"lock {snap / 'LOCK'} has 2 hard links: it is "
                                                  f"also another file .cp -al"):
            DirectoryLock(snap).acquire()
        (snap / "LOCK").unlink()                   # as the message says: snap is then free
        DirectoryLock(snap).acquire().release()
        assert '"run": "' + "a" * 32 in (ck / "LOCK").read_text()  # ck's note untouched


def test_a_lock_holding_a_pickle_is_read_as_json_only(tmp_path):
    with DirectoryLock(tmp_path) as held:
        os.pwrite(held.fd, pickle.dumps(Planted(tmp_path / "marker")), 0)
        with pytest.raises(CheckpointError, match=r"in use by another run \(unknown;"):
            DirectoryLock(tmp_path).acquire()
    assert not (tmp_path / "marker").exists()


# ------------------------------------------------------------------ readers and writers
def test_readers_share_the_lock_and_a_writer_is_told_who_holds_it(tmp_path):
    with DirectoryLock(tmp_path, write=False), DirectoryLock(tmp_path, write=False):
        with pytest.raises(CheckpointError, match=r"in use by another run \(a resume that does not save"):
            DirectoryLock(tmp_path).acquire()
    with DirectoryLock(tmp_path).acquire(run="b" * 32):
        with pytest.raises(CheckpointError, match=rf"in use by another run \(pid {os.getpid()} on .*, "
                                                  rf"run {'b' * 32}"):
            DirectoryLock(tmp_path, write=False).acquire()
    DirectoryLock(tmp_path).acquire().release()


def test_a_read_only_directory_is_read_with_or_without_a_lock_and_never_written(tmp_path):
    held, bare = tmp_path / "held", tmp_path / "bare"
    held.mkdir()
    bare.mkdir()
    DirectoryLock(held).acquire().release()  # a LOCK left by the run that wrote it
    before = (held / "LOCK").read_bytes()
    for d, has_lock in ((held, True), (bare, False)):
        with ReadOnly(d):
            lock = DirectoryLock(d, write=False).acquire(run="c" * 32)
            assert (lock.fd is not None) == has_lock
            lock.release()
            probe(d, write=False)
            with pytest.raises(CheckpointError, match=f"checkpoint directory {re.escape(str(d))} cannot "
                                                      f"be written .Read-only file system.: this run saves"):
                DirectoryLock(d).acquire()
    assert (held / "LOCK").read_bytes() == before and not (bare / "LOCK").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permissions")
def test_a_directory_without_write_permission_is_read_but_not_saved_into(tmp_path):
    d = tmp_path / "ck"
    d.mkdir()
    DirectoryLock(d).acquire().release()  # its LOCK stays writable: the directory is not
    d.chmod(0o555)
    try:
        DirectoryLock(d, write=False).acquire().release()
        with pytest.raises(CheckpointError, match="cannot be written .Permission denied.: this run saves"):
            DirectoryLock(d).acquire()
    finally:
        d.chmod(0o755)


@pytest.fixture
def no_ranks(monkeypatch):
    import parlab.comm

    monkeypatch.setattr(parlab.comm, "launch", lambda *a, **k: pytest.fail("a rank was started"))


@pytest.mark.parametrize("argv", [
    ["--resume", "--save-every", "1"],   # a resume that would save
    ["--save-every", "1"],               # a fresh run that would save (into a new directory)
])
def test_a_run_that_would_save_into_a_read_only_directory_exits_2_before_any_rank_starts(
        tmp_path, no_ranks, capsys, argv):
    d = tmp_path / "ck"
    if "--resume" in argv:
        (d / "step-00000001").mkdir(parents=True)
    with ReadOnly(tmp_path):
        assert main(["--steps", "2", "--wide", "--checkpoint-dir", str(d), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be written (Read-only file system): this run saves" in err, err
