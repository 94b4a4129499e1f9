"""The files of a checkpoint and what vouches for them: the manifest (``COMPLETE.json``: checked
field by field, sealed by its own sha256, its ``step`` the directory's), each rank's
``SHARD.json`` (its size and sha256 held by the manifest) and every file a rank wrote (their
sizes and sha256 held by its ``SHARD.json``). A load reads nothing that is not listed there and
inside the checkpoint: no ``..``, no symbolic link, no file the tables do not name.

    manifest = read_manifest(path)        # CheckpointError naming the file and the rule broken
    shards = read_shards(path, manifest)  # [(rank directory, its SHARD.json)], hashes checked
    verify_files(d, shard)                # every data file of one rank: present, size, sha256
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

FORMAT = "parlab-3d-checkpoint/2"
MANIFEST = "COMPLETE.json"
SHARD = "SHARD.json"
PARTIAL = ".partial"
STEP = re.compile(r"^step-(\d{8})$")
RUN = re.compile(r"^[0-9a-f]{32}$")
LAYOUT = ("dp", "tp", "pp", "v")
PIECE = ("key", "kind", "name", "shape", "offsets", "sizes")


class CheckpointError(ValueError):
    """A checkpoint that is corrupt, partial, tampered with or missing a file (the message names
    the file and what is wrong)."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def seal(manifest: dict) -> dict:
    """``manifest`` with its ``checksum``: the sha256 of its canonical JSON without that field."""
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return {**body, "checksum": hashlib.sha256(text.encode()).hexdigest()}


def write_json(path: Path, obj: dict) -> None:
    """Write ``obj`` to ``path`` through a temporary file, fsync'd, then renamed."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> dict:
    """A JSON object from ``path``: a missing, unreadable or non-object file is a CheckpointError."""
    if path.is_symlink():
        raise CheckpointError(f"checkpoint file {path} is a symbolic link: a checkpoint holds "
                              f"only the files its run wrote")
    try:
        obj = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint file {path} is missing (a partial or damaged "
                              f"checkpoint): cannot resume from it") from None
    except IsADirectoryError:
        raise CheckpointError(f"checkpoint file {path} is a directory, not a file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"checkpoint file {path} is corrupt (not valid JSON: {err})") from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"checkpoint file {path} holds a JSON {type(obj).__name__}, "
                              f"expected an object")
    return obj


def _field(path: Path, obj: dict, name: str, kind: type | tuple, what: str):
    value = obj.get(name)
    if name not in obj or not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        got = "no such field" if name not in obj else f"{value!r}"
        raise CheckpointError(f"checkpoint file {path}: field {name!r} must be {what}, got {got}")
    return value


def _count(path: Path, obj: dict, name: str, low: int = 1) -> int:
    value = _field(path, obj, name, int, f"an integer >= {low}")
    if value < low:
        raise CheckpointError(f"checkpoint file {path}: field {name!r} must be an integer >= {low}, "
                              f"got {value!r}")
    return value


def read_manifest(path: Path) -> dict:
    """The checked manifest of the checkpoint directory ``path`` (``step-N``)."""
    file = path / MANIFEST
    m = read_json(file)
    if m.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint file {file} has format {m.get('format')!r}, expected "
                              f"{FORMAT!r}")
    step = _count(file, m, "step", 0)
    if (match := STEP.match(path.name)) is None or int(match.group(1)) != step:
        raise CheckpointError(f"checkpoint file {file} says step {step} but its directory is "
                              f"{path.name!r} (expected step-{step:08d}): moved or edited")
    run = _field(file, m, "run", str, "a run id (32 hex digits)")
    if not RUN.match(run):
        raise CheckpointError(f"checkpoint file {file}: field 'run' must be a run id (32 hex "
                              f"digits), got {run!r}")
    world = _count(file, m, "world")
    layout = _field(file, m, "layout", dict, "an object {dp, tp, pp, v}")
    for k in LAYOUT:
        _count(file, layout, k)
    if layout["dp"] * layout["tp"] * layout["pp"] != world:
        raise CheckpointError(f"checkpoint file {file}: layout dp x tp x pp = {layout['dp']} x "
                              f"{layout['tp']} x {layout['pp']} is not its world {world}")
    for name in ("config", "plan", "optimizer"):
        _field(file, m, name, dict, "an object")
    ranks = _field(file, m, "ranks", list, f"a list of {world} rank entries")
    if len(ranks) != world:
        raise CheckpointError(f"checkpoint file {file}: 'ranks' lists {len(ranks)} ranks, its "
                              f"world is {world}")
    for r, entry in enumerate(ranks):
        if not isinstance(entry, dict) or entry.get("dir") != f"rank-{r:05d}":
            raise CheckpointError(f"checkpoint file {file}: ranks[{r}] must be {{'dir': "
                                  f"'rank-{r:05d}', 'bytes', 'sha256'}}, got {entry!r} (a rank's "
                                  f"shard lives in its own directory inside the checkpoint)")
        _count(file, entry, "bytes", 0)
        _field(file, entry, "sha256", str, "a sha256 hex digest")
    if seal(m).get("checksum") != m.get("checksum"):
        raise CheckpointError(f"checkpoint file {file} was changed after it was written: its "
                              f"checksum does not match its content")
    return m


def rank_dir(path: Path, name: str) -> Path:
    """``path / name``, a real directory inside the checkpoint (no link, nothing outside)."""
    d = path / name
    if d.is_symlink() or d.resolve().parent != path.resolve():
        raise CheckpointError(f"checkpoint directory {d} is a symbolic link or lies outside "
                              f"{path}: a checkpoint reads only its own files")
    if not d.is_dir():
        raise CheckpointError(f"checkpoint directory {d} is missing: the checkpoint is damaged")
    return d


def check_shard(d: Path, shard: dict, rank: int, run: str) -> dict:
    """``SHARD.json`` of rank ``rank``: its rank, its run, its pieces, its files table."""
    file = d / SHARD
    if _field(file, shard, "rank", int, f"the integer {rank}") != rank:
        raise CheckpointError(f"checkpoint file {file} belongs to rank {shard['rank']}, not {rank}")
    if _field(file, shard, "run", str, "a run id") != run:
        raise CheckpointError(f"checkpoint file {file} was written by run {shard['run']} but "
                              f"checkpoint {d.parent} belongs to run {run}: a checkpoint holds "
                              f"one run's shards only (two trainers on one directory?)")
    for piece in _field(file, shard, "pieces", list, "a list of pieces"):
        if not isinstance(piece, dict) or any(k not in piece for k in PIECE):
            raise CheckpointError(f"checkpoint file {file}: a piece must have the fields "
                                  f"{', '.join(PIECE)}, got {piece!r}")
    files = _field(file, shard, "files", dict, "a table {file name: {bytes, sha256}}")
    if not files:
        raise CheckpointError(f"checkpoint file {file} lists no files: a rank's shard has at "
                              f"least DCP's .metadata and one data file")
    for name, info in files.items():
        if name in (".", "..", SHARD) or "/" in name or "\0" in name:
            raise CheckpointError(f"checkpoint file {file} lists a file {name!r}: only plain "
                                  f"names of files beside it")
        if not isinstance(info, dict):
            raise CheckpointError(f"checkpoint file {file}: files[{name!r}] must be {{bytes, sha256}}")
        _count(file, info, "bytes", 0)
        _field(file, info, "sha256", str, "a sha256 hex digest")
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
        out.append((d, check_shard(d, read_json(file), r, manifest["run"])))
    return out


def verify_files(d: Path, shard: dict) -> None:
    """Every file rank directory ``d``'s SHARD.json lists: a plain file, its size, its sha256."""
    for name, info in shard["files"].items():
        f = d / name
        if f.is_symlink() or not f.is_file():
            raise CheckpointError(f"checkpoint file {f} is missing (or not a plain file): the "
                                  f"checkpoint is damaged")
        size = f.stat().st_size
        if size != info["bytes"]:
            raise CheckpointError(f"checkpoint file {f} is {size} bytes, {d / SHARD} recorded "
                                  f"{info['bytes']}: truncated or damaged")
        if sha256(f) != info["sha256"]:
            raise CheckpointError(f"checkpoint file {f} is corrupt: its sha256 differs from what "
                                  f"{d / SHARD} recorded when it was written")
    check_dcp_paths(d, shard)


def check_dcp_paths(d: Path, shard: dict) -> None:
    """DCP's ``.metadata`` names the data files a load opens: each must be one the (hashed)
    files table lists, beside it."""
    import warnings

    warnings.filterwarnings("ignore", message="torch.distributed is disabled")
    from torch.distributed.checkpoint import FileSystemReader

    try:
        meta = FileSystemReader(str(d)).read_metadata()
    except Exception as err:  # a pickle that is not DCP's
        raise CheckpointError(f"checkpoint file {d / '.metadata'} could not be read: {err}") from None
    for info in (getattr(meta, "storage_data", None) or {}).values():
        rel = getattr(info, "relative_path", None)
        if rel is not None and rel not in shard["files"]:
            raise CheckpointError(f"checkpoint file {d / '.metadata'} points at {rel!r}, not a "
                                  f"file its {SHARD} lists: a load reads only the checkpoint's files")


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
    """Check a whole checkpoint, every file of every rank (one process). Returns its manifest."""
    path = Path(path)
    manifest = read_manifest(path)
    for d, shard in read_shards(path, manifest):
        verify_files(d, shard)
    return manifest
