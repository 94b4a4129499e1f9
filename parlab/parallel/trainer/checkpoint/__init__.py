"""Sharded checkpoints of a 3D run that lose nothing (chapter 08, ``python -m parlab.train``).

    files.py     the manifest, its hash and checks; the directory's entries
    shards.py    each rank's SHARD.json (its data file's index, its pieces) and file hashes
    tensors.py   a rank's tensors as raw bytes by a JSON index: nothing is ever unpickled
    tiling.py    the pieces tile every tensor exactly (no overlap, no gap)
    owner.py     the directory's lock and the run that owns it
    runs.py      steps on disk, compatibility of a resume, claiming a directory
    sharded.py   save / load / re-shard
"""

from .files import CheckpointError, complete_steps, step_dir
from .owner import DirectoryLock, check_directory, probe
from .runs import (
    check_compatible,
    latest_step,
    owning,
    refuse_overwrite,
    saved_every,
    saves,
)
from .sharded import load, load_latest, optimizer_settings, read_checkpoint, save
from .shards import verify_checkpoint

__all__ = [
    "CheckpointError", "verify_checkpoint", "DirectoryLock", "check_directory", "probe",
    "check_compatible", "complete_steps", "latest_step", "owning", "refuse_overwrite", "saved_every", "saves",
    "step_dir",
    "load", "load_latest", "optimizer_settings", "read_checkpoint", "save",
]
