"""Each rank's ``SHARD.json`` and its data file: what the JSON must say (its rank, its run, the
index of ``tensors.bin``, pieces inside their tensors), its hash against the manifest, and the
data file's size and sha256 against it.

    shards = read_shards(path, manifest)  # [(rank directory, its SHARD.json)], hashes checked
    verify_files(d, shard)                # the data file of one rank: present, size, sha256
    verify_checkpoint(path)               # all of it, every rank, and the tiling (one process)
"""

from __future__ import annotations

import os
from pathlib import Path

from .files import (
    DATA,
    DTYPES,
    FORMAT,
    KINDS,
    MANIFEST,
    PIECE,
    SHARD,
    CheckpointError,
    _count,
    _field,
    rank_dir,
    read_json,
    read_manifest,
    sha256,
)
from .tiling import check_tiling


def _ints(file: Path, where: str, value, n: int | None = None) -> list[int]:
    """``value``: a list of integers >= 0 (of length ``n``)."""
    if (not isinstance(value, list) or n is not None and len(value) != n
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)):
        size = "" if n is None else f"{n} "
        raise CheckpointError(f"checkpoint file {file}: {where} must be a list of {size}integers "
                              f">= 0, got {value!r}")
    return value


def check_index(file: Path, index: dict, size: int) -> None:
    """The index of a rank's data file of ``size`` bytes: each tensor's dtype one of ``DTYPES``,
    its ``bytes`` its shape's, and the tensors one after another from byte 0 to the file's end
    (no gap, no overlap, nothing outside it)."""
    for key, e in index.items():
        if not isinstance(e, dict) or e.get("dtype") not in DTYPES:
            raise CheckpointError(f"checkpoint file {file}: tensors[{key!r}] must be {{dtype (one of "
                                  f"{', '.join(DTYPES)}), shape, at, bytes}}, got {e!r}")
        numel = DTYPES[e["dtype"]]
        for n in _ints(file, f"tensors[{key!r}]['shape']", e.get("shape")):
            numel *= n
        _count(file, e, "at", 0)
        if _count(file, e, "bytes", 0) != numel:
            raise CheckpointError(f"checkpoint file {file}: tensors[{key!r}] is {e['bytes']} bytes, "
                                  f"but {e['dtype']} of shape {e['shape']} is {numel}")
    at = 0
    for key, e in sorted(index.items(), key=lambda kv: kv[1]["at"]):
        if e["at"] != at:
            raise CheckpointError(f"checkpoint file {file}: tensors[{key!r}] starts at byte {e['at']}, "
                                  f"expected {at}: a rank's tensors lie one after another in "
                                  f"{DATA}, no gap, no overlap")
        at += e["bytes"]
    if at != size:
        raise CheckpointError(f"checkpoint file {file}: its tensors fill {at} bytes of {DATA}, which "
                              f"is {size} bytes")


def check_piece(file: Path, piece, index: dict) -> None:
    """One piece: a part of tensor ``name``'s (kind ``kind``) full ``shape`` at ``offsets`` of
    ``sizes``, inside that shape, stored as tensor ``key`` of exactly those sizes."""
    if not isinstance(piece, dict) or any(k not in piece for k in PIECE):
        raise CheckpointError(f"checkpoint file {file}: a piece must have the fields "
                              f"{', '.join(PIECE)}, got {piece!r}")
    if piece["kind"] not in KINDS or not isinstance(piece["name"], str):
        raise CheckpointError(f"checkpoint file {file}: a piece's kind must be one of "
                              f"{', '.join(KINDS)} and its name a string, got {piece!r}")
    shape = _ints(file, "a piece's shape", piece["shape"])
    offsets = _ints(file, "a piece's offsets", piece["offsets"], len(shape))
    sizes = _ints(file, "a piece's sizes", piece["sizes"], len(shape))
    if any(o + n > full for o, n, full in zip(offsets, sizes, shape, strict=True)):
        raise CheckpointError(f"checkpoint file {file}: piece {piece['key']!r} at offsets {offsets} "
                              f"of sizes {sizes} reaches outside its tensor's shape {shape}")
    stored = index.get(piece["key"]) if isinstance(piece["key"], str) else None
    if stored is None or stored["shape"] != sizes:
        raise CheckpointError(f"checkpoint file {file}: piece {piece['key']!r} of sizes {sizes} "
                              f"is not a tensor of those sizes in its index")


def check_shard(d: Path, shard: dict, rank: int, run: str) -> dict:
    """``SHARD.json`` of rank ``rank``: its rank, its run, its files table (``DATA`` only), the
    index of its data file and its pieces."""
    file = d / SHARD
    if _field(file, shard, "rank", int, f"the integer {rank}") != rank:
        raise CheckpointError(f"checkpoint file {file} belongs to rank {shard['rank']}, not {rank}")
    if _field(file, shard, "run", str, "a run id") != run:
        raise CheckpointError(f"checkpoint file {file} was written by run {shard['run']} but "
                              f"checkpoint {d.parent} belongs to run {run}: a checkpoint holds "
                              f"one run's shards only (two trainers on one directory?)")
    files = _field(file, shard, "files", dict, "a table {file name: {bytes, sha256}}")
    if sorted(files) != [DATA]:
        raise CheckpointError(f"checkpoint file {file} lists the files {sorted(files)}: a rank's "
                              f"shard is its {SHARD} and one file {DATA} (format {FORMAT})")
    info = _field(file, files, DATA, dict, "{bytes, sha256}")
    _field(file, info, "sha256", str, "a sha256 hex digest")
    index = _field(file, shard, "tensors", dict, f"a table {{key: {{dtype, shape, at, bytes}}}} of {DATA}")
    check_index(file, index, _count(file, info, "bytes", 0))
    pieces = _field(file, shard, "pieces", list, "a list of pieces")
    for piece in pieces:
        check_piece(file, piece, index)
    rng = index.get(f"rng/{rank}", {})
    if rng.get("dtype") != "uint8" or len(rng.get("shape", ())) != 1:
        raise CheckpointError(f"checkpoint file {file}: tensors['rng/{rank}'] must be this rank's "
                              f"RNG state (uint8, 1-D), got {rng or 'nothing'!r}")
    keys = {piece["key"] for piece in pieces} | {f"rng/{rank}"}
    if set(index) != keys:
        raise CheckpointError(f"checkpoint file {file}: its index lists tensors no piece names "
                              f"({', '.join(sorted(set(index) - keys))}): a rank stores its pieces "
                              f"and its RNG state, nothing else")
    there = sorted(p.name for p in d.iterdir() if p.name != SHARD)
    if there != sorted(files):
        extra, gone = sorted(set(there) - set(files)), sorted(set(files) - set(there))
        raise CheckpointError(f"checkpoint directory {d} holds " + (
            f"files its {SHARD} does not list: {', '.join(extra)}" if extra else
            f"no file {', '.join(gone)} that its {SHARD} lists: the checkpoint is damaged"))
    return shard


def read_shards(path: Path, manifest: dict) -> list[tuple[Path, dict]]:
    """Each rank's (directory, SHARD.json), every SHARD.json checked against the manifest's hash."""
    out = []
    for r, entry in enumerate(manifest["ranks"]):
        d = rank_dir(path, entry["dir"])
        file = d / SHARD
        if not file.is_file() or file.is_symlink():
            raise CheckpointError(f"checkpoint file {file} is missing (or not a plain file): the "
                                  f"checkpoint is damaged")
        if file.stat().st_size != entry["bytes"] or sha256(file) != entry["sha256"]:
            raise CheckpointError(f"checkpoint file {file} is corrupt or was edited: its size or "
                                  f"sha256 differs from what {path / MANIFEST} recorded")
        shard = check_shard(d, read_json(file), r, manifest["run"])
        check_sizes(d, shard)  # the index's sizes are the files' (bounds what a check allocates)
        out.append((d, shard))
    return out


def check_sizes(d: Path, shard: dict) -> None:
    """The files rank directory ``d``'s SHARD.json lists: plain files of the sizes it records."""
    for name, info in shard["files"].items():
        f = d / name
        if f.is_symlink() or not f.is_file():
            raise CheckpointError(f"checkpoint file {f} is missing (or not a plain file): the "
                                  f"checkpoint is damaged")
        size = f.stat().st_size
        if size != info["bytes"]:
            raise CheckpointError(f"checkpoint file {f} is {size} bytes, {d / SHARD} recorded "
                                  f"{info['bytes']}: truncated or damaged")


def verify_files(d: Path, shard: dict) -> None:
    """The file rank directory ``d``'s SHARD.json lists: a plain file, its size, its sha256."""
    check_sizes(d, shard)
    for name, info in shard["files"].items():
        f = d / name
        if sha256(f) != info["sha256"]:
            raise CheckpointError(f"checkpoint file {f} is corrupt: its sha256 differs from what "
                                  f"{d / SHARD} recorded when it was written")


def shard_entries(partial: Path, world: int, run: str) -> list[dict]:
    """At save, on rank 0, after every rank wrote: the manifest's ``ranks`` (each SHARD.json's
    size and sha256), refusing a shard that another run or another rank wrote."""
    out = []
    for r in range(world):
        d = partial / f"rank-{r:05d}"
        check_shard(d, read_json(d / SHARD), r, run)
        f = d / SHARD
        out.append({"dir": d.name, "bytes": f.stat().st_size, "sha256": sha256(f)})
    return out


def verify_checkpoint(path: str | os.PathLike) -> dict:
    """Check a whole checkpoint, every file of every rank (one process), and that its pieces tile
    every tensor (``tiling``). Returns its manifest."""
    path = Path(path)
    manifest = read_manifest(path)
    shards = read_shards(path, manifest)
    check_tiling(path, shards)
    for d, shard in shards:
        verify_files(d, shard)
    return manifest
