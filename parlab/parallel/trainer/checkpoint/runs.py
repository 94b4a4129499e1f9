"""Which run a checkpoint directory belongs to, and what a run may resume: the directory's owner
(``claim``: rank 0 takes its lock and the run id, every rank learns them), the newest complete
step, a fresh run refused over old checkpoints, and a resume refused when anything that shapes
the run differs (``check_compatible``).

What must match on resume: the model shape (``SHAPE_FIELDS``), the data stream (global batch
and seed: the data position means the same batches only with both) and the optimizer (AdamW's
lr, betas, eps, weight decay). What may differ: the layout (dp x tp x pp, chunks), the schedule,
the number of micro-batches and ZeRO-1, which change the order of float sums, not the run
(re-sharding); the RNG state is restored only on the very same layout.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

from .files import (
    MANIFEST,
    PARTIAL,
    CheckpointError,
    complete_steps,
    read_json,
    read_manifest,
    step_dir,
)
from .owner import DirectoryLock, check_directory, new_run_id

SHAPE_FIELDS = ("vocab_size", "seq_len", "n_layer", "n_head", "hidden", "ffn_mult", "tie_embeddings")
DATA_FIELDS = ("batch_size", "data_seed")
RUN_FIELDS = (*DATA_FIELDS, "lr")  # TrainPlan fields a resume must keep
NOTE_BYTES = 4096  # the claim's broadcast: {"run": id} or {"error": message}, as JSON


def latest_step(directory: str | os.PathLike) -> int:
    """The highest complete checkpoint's step in ``directory``; FileNotFoundError when there is
    none (partial checkpoints are never taken: a ``.partial`` directory is ignored)."""
    check_directory(directory)
    steps = complete_steps(directory)
    if not steps:
        d = Path(directory)
        partial = sorted(p.name for p in d.glob(f"step-*{PARTIAL}")) if d.is_dir() else []
        extra = f" (only partial ones, never loaded: {', '.join(partial)})" if partial else ""
        raise FileNotFoundError(f"--resume: no complete checkpoint in {directory}{extra}; "
                                f"refusing to start from scratch")
    return steps[-1]


def refuse_overwrite(directory: str | os.PathLike) -> None:
    """A fresh run (no resume) must not write over an earlier run's checkpoints."""
    check_directory(directory)
    steps = complete_steps(directory)
    if steps:
        raise ValueError(f"checkpoint directory {directory} already holds checkpoints (latest: "
                         f"step {steps[-1]}): pass resume (--resume) to continue from it, or use "
                         f"an empty directory")


def run_fields(config, plan, optimizer: dict) -> dict:
    """What the manifest records of the run (all of it checked or reported on resume)."""
    from dataclasses import asdict

    return {"config": asdict(config), "plan": asdict(plan), "optimizer": optimizer}


def check_compatible(path: Path, manifest: dict, config, plan, optimizer: dict | None = None) -> None:
    """A checkpoint resumes the model shape, data stream and optimizer it was saved with (any
    layout); else a ValueError naming the fields, theirs and ours."""
    file = path / MANIFEST
    saved = manifest.get("config", {})
    diff = [f for f in SHAPE_FIELDS if saved.get(f) != getattr(config, f)]
    if diff:
        theirs = ", ".join(f"{f}={saved.get(f)!r}" for f in diff)
        ours = ", ".join(f"{f}={getattr(config, f)!r}" for f in diff)
        raise ValueError(f"checkpoint {path} holds a model with {theirs} but this run builds "
                         f"{ours}: a checkpoint resumes only the model shape it was saved from "
                         f"(the GPTConfig fields {', '.join(SHAPE_FIELDS)} must match; the layout "
                         f"dp x tp x pp may differ)")
    data = manifest.get("plan", {})
    diff = [f for f in DATA_FIELDS if data.get(f) != getattr(plan, f)]
    if diff:
        raise ValueError(f"checkpoint {path} was saved with " + ", ".join(
            f"{f}={data.get(f)!r}" for f in diff) + " but this run has " + ", ".join(
            f"{f}={getattr(plan, f)!r}" for f in diff) + ": the data position (steps done) "
            "means the same batches only with the same global batch size and data seed")
    ours = {"lr": plan.lr, **(optimizer or {})}
    theirs = {"lr": data.get("lr"), **manifest.get("optimizer", {})}
    diff = [k for k in ours if _plain(theirs.get(k)) != _plain(ours[k])]
    if diff:
        raise ValueError(f"checkpoint {path} was saved with " + ", ".join(
            f"{k}={theirs.get(k)!r}" for k in diff) + " but this run has " + ", ".join(
            f"{k}={ours[k]!r}" for k in diff) + f" ({file}): a resume continues the same run with "
            "the same optimizer; start a fresh run in an empty directory to change it")


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


# ---------------------------------------------------------------------------- the run's owner
def _share(comm, note: dict, device) -> dict:
    """Rank 0's ``note`` on every rank (one broadcast of NOTE_BYTES bytes of JSON)."""
    import torch

    buf = torch.zeros(NOTE_BYTES, dtype=torch.uint8, device=device)
    if comm.rank == 0:
        raw = json.dumps(note).encode()  # < NOTE_BYTES: an error is cut to 600 characters
        buf[:len(raw)] = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    out = comm.broadcast(buf) if comm.world_size > 1 else buf
    return json.loads(bytes(out.cpu().tolist()).rstrip(b"\0").decode())


def claim(comm, directory: str | os.PathLike, resume: bool, device="cpu",
          write: bool = True) -> tuple[DirectoryLock | None, str]:
    """Collective: rank 0 locks ``directory`` for this run (exclusively if it will save:
    ``write``; else shared with other readers) and picks its run id (a resume takes the newest
    complete checkpoint's, a fresh run a new one and refuses old checkpoints). Returns (the
    lock on rank 0, else None; the run id). Every rank raises rank 0's error."""
    lock, note = None, {}
    if comm.rank == 0:
        try:
            lock = DirectoryLock(directory, write).acquire(wait=1.0)  # outlast another run's probe
            if resume:
                run = read_manifest(step_dir(directory, latest_step(directory)))["run"]
            else:
                refuse_overwrite(directory)
                run = new_run_id()
            lock.note(run)
            note = {"run": run}
        except (ValueError, OSError) as err:
            if lock is not None:
                lock.release()
            lock = None
            note = {"error": str(err)[:600], "missing": isinstance(err, FileNotFoundError)}
    note = _share(comm, note, device)
    if "error" in note:
        raise (FileNotFoundError if note["missing"] else CheckpointError)(note["error"])
    return lock, note["run"]


def saved_every(directory: str | os.PathLike) -> int | None:
    """The ``save_every`` the latest complete checkpoint in ``directory`` was saved with (None:
    no checkpoint, an unreadable one, or one saved before the manifest recorded it). A resume
    that does not name ``--save-every`` keeps it."""
    steps = complete_steps(directory)
    if not steps:
        return None
    try:
        value = read_json(step_dir(directory, steps[-1]) / MANIFEST).get("save_every")
    except (CheckpointError, OSError, ValueError):
        return None
    return value if type(value) is int and value >= 0 else None


def saves(checkpoint) -> bool:
    """Whether a run with these ``Checkpointing`` settings writes its directory: it saves every
    ``save_every`` steps, and never else (there is no final save). A run that does not save
    only reads (a resume), so it may resume a read-only checkpoint."""
    return checkpoint.save_every > 0


@contextmanager
def owning(comm, checkpoint, device="cpu"):
    """``with owning(comm, checkpoint) as run:`` this run owns ``checkpoint.directory`` (``claim``:
    exclusively if it ``saves``) until the block ends; yields its run id (None without a
    checkpoint)."""
    if checkpoint is None:
        yield None
        return
    lock, run = claim(comm, checkpoint.directory, checkpoint.resume, device, saves(checkpoint))
    try:
        yield run
    finally:
        if lock is not None:
            lock.release()
