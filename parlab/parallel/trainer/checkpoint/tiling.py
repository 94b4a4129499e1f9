"""That a checkpoint's pieces tile every tensor exactly: over all ranks' ``SHARD.json``, each
element position of each tensor (model weights and AdamW's two moments) is covered by exactly
one piece. Counting elements is not enough: a piece given another's offsets covers as many
elements, twice over one block and never the other (a resume would load wrong weights).

    check_tiling(path, shards)     # CheckpointError naming the tensor, the overlap or the gap

Each piece was already checked inside its tensor's shape (``files.check_piece``). The check
counts coverage in a tensor of the tensor's shape: the rule ``torch.distributed.checkpoint``
checks of a global save plan (chunks in bounds, no overlap, the whole volume:
``default_planner._validate_global_plan``), here checked at load, before any rank reads a byte.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from .files import KINDS, SHARD, CheckpointError


def check_tensor(path: Path, kind: str, name: str, entries: list[tuple[Path, dict]]) -> None:
    """The pieces ``entries`` [(rank directory, piece)] of ``kind`` ``name`` tile its shape: they
    hold at least its elements, and none twice (so, each exactly once)."""
    shape = entries[0][1]["shape"]
    for d, piece in entries:
        if piece["shape"] != shape:
            raise CheckpointError(f"checkpoint {path}: {d.name}/{SHARD} gives {kind} {name!r} the "
                                  f"shape {piece['shape']}, another rank's piece {shape}")
    numel, held = math.prod(shape), sum(math.prod(piece["sizes"]) for _, piece in entries)
    if held < numel:  # counted first: the count below is as large as the pieces' bytes
        raise CheckpointError(f"checkpoint {path}: the pieces of {kind} {name!r} hold {held} of its "
                              f"{numel} elements: a gap (a checkpoint's pieces tile each tensor "
                              f"exactly once)")
    count = torch.zeros(shape, dtype=torch.int32)
    for _, piece in entries:
        count[tuple(slice(o, o + n) for o, n in zip(piece["offsets"], piece["sizes"], strict=True))] += 1
    if (count > 1).any():
        at = [int(i) for i in (count > 1).nonzero()[0]]
        dirs = sorted({d.name for d, p in entries if all(
            o <= i < o + n for i, o, n in zip(at, p["offsets"], p["sizes"], strict=True))})
        raise CheckpointError(f"checkpoint {path}: pieces of {kind} {name!r} in {', '.join(dirs)} "
                              f"overlap (position {at} is stored {int(count[tuple(at)])} times): a "
                              f"checkpoint's pieces tile each tensor exactly once")


def check_tiling(path: Path, shards: list[tuple[Path, dict]]) -> None:
    """Every tensor named by a piece has pieces of every kind (``KINDS``), and they tile it."""
    found: dict[tuple[str, str], list[tuple[Path, dict]]] = {}
    for d, shard in shards:
        for piece in shard["pieces"]:
            found.setdefault((piece["kind"], piece["name"]), []).append((d, piece))
    for name in sorted({name for _, name in found}):
        for kind in KINDS:
            if (kind, name) not in found:
                raise CheckpointError(f"checkpoint {path} has no {kind} pieces of parameter "
                                      f"{name!r} (files {path}/rank-*/{SHARD})")
            check_tensor(path, kind, name, found[(kind, name)])
