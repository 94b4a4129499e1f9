"""Suite-wide guards: no test may leave a child process or a parlab shared-memory segment behind."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

SHM = Path("/dev/shm")
SHM_PREFIX = "parlab"  # every shared-memory segment parlab creates is named parlab*


def parlab_segments() -> set[str]:
    if not SHM.is_dir():
        return set()
    return {p.name for p in SHM.iterdir() if p.name.lstrip("/").startswith(SHM_PREFIX)}


def live_children() -> list[int]:
    """PIDs of this process's live (non-zombie) children."""
    pids = []
    task = Path(f"/proc/{os.getpid()}/task")
    for t in task.iterdir() if task.is_dir() else []:
        try:
            pids += [int(p) for p in (t / "children").read_text().split()]
        except OSError:
            continue
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


@pytest.fixture(autouse=True, scope="module")
def no_leaks():
    """After each test module: no new parlab shared-memory segment, no live child process
    (kernels started by nbval and the browser test's server are children only while they run)."""
    before = parlab_segments()
    yield
    for p in multiprocessing.active_children():  # reap finished mp children so they don't count
        p.join(timeout=0)
    leaked = parlab_segments() - before
    assert not leaked, f"shared-memory segments left behind: {sorted(leaked)}"
    children = live_children()
    assert not children, f"child processes left behind: {children}"
