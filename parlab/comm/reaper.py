"""Ending a rank and every process it started: process groups, descendant trees, a subreaper.

Each worker is the leader of its own process group (``start_new_session=True``), so a helper
it starts (``subprocess.Popen(["sleep", "30"])``) is in that group and ``killpg`` ends both.
A helper that leaves the group (``start_new_session=True``, a daemon's double fork) is still a
descendant: the worker makes itself a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``),
so such orphans are re-parented to the worker instead of init, and the worker kills its whole
tree (``end_descendants``) before it reports its result or exits. The launcher ends a live
worker the same way from outside (``kill_tree``). Descendants are read from
``/proc/<pid>/task/<tid>/children``; where there is no /proc, process groups alone are used.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def become_subreaper() -> bool:
    """Orphaned descendants of this process become its children (Linux); False elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's), zombies included; [] without /proc."""
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` in the process tree, parents before their children."""
    found, todo = [], [pid]
    while todo:
        for child in children(todo.pop()):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_group(pgid: int) -> None:
    """SIGKILL every process of the group (no error if it is already empty)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group and every descendant of ``pid`` (from outside)."""
    tree = descendants(pid)
    kill_group(pid)
    for p in tree:
        _kill(p)


def end_descendants(limit: float = 2.0) -> None:
    """Kill every descendant of this process and reap them (for a subreaper, all of them end
    up as its children). Returns when none is left, or after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while True:
        tree = descendants(os.getpid())
        if not tree:
            return
        for p in tree:
            _kill(p)
        while True:  # reap whatever has ended; the rest is re-listed and killed again
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if time.monotonic() > deadline:
            return
        time.sleep(0.002)
