"""Sharded checkpoints of a 3D run that lose nothing (chapter 08, ``python -m parlab.train``).

    files.py     the manifest and shard files, their hashes and checks
    owner.py     the directory's lock and the run that owns it
    runs.py      steps on disk, compatibility of a resume, claiming a directory
    sharded.py   save / load / re-shard with torch.distributed.checkpoint
"""

from .files import CheckpointError, verify_checkpoint
from .owner import DirectoryLock, check_directory, probe
from .runs import check_compatible, complete_steps, latest_step, owning, refuse_overwrite, step_dir
from .sharded import load, load_latest, optimizer_settings, read_checkpoint, save

__all__ = [
    "CheckpointError", "verify_checkpoint", "DirectoryLock", "check_directory", "probe",
    "check_compatible", "complete_steps", "latest_step", "owning", "refuse_overwrite", "step_dir",
    "load", "load_latest", "optimizer_settings", "read_checkpoint", "save",
]
