"""The files of a checkpoint and what vouches for them: the manifest (``COMPLETE.json``: checked
field by field, sealed by its own sha256, its ``step`` the directory's), each rank's
``SHARD.json`` (its size and sha256 held by the manifest) and the one data file a rank wrote
(``tensors.bin``: raw bytes, its size and sha256 and the index of its tensors held by its
``SHARD.json``). A load reads nothing that is not listed there and inside the checkpoint: no
``..``, no symbolic link, no file the tables do not name; and it parses only JSON and raw bytes,
never a pickle (``tensors``). The hashes catch damage, not a forger: anyone who can write the
directory can recompute them (the README's "What it does not guarantee").

    manifest = read_manifest(path)        # CheckpointError naming the file and the rule broken
    d = rank_dir(path, "rank-00000")      # a real directory inside the checkpoint

What each rank's ``SHARD.json`` must say, and the checks of its data file: ``shards``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

FORMAT = "parlab-3d-checkpoint/3"
PICKLED = ("parlab-3d-checkpoint/1", "parlab-3d-checkpoint/2")  # shards held DCP's pickles
MANIFEST = "COMPLETE.json"
SHARD = "SHARD.json"
PARTIAL = ".partial"
STEP = re.compile(r"^step-(\d{8})$")
RUN = re.compile(r"^[0-9a-f]{32}$")
LAYOUT = ("dp", "tp", "pp", "v")
PIECE = ("key", "kind", "name", "shape", "offsets", "sizes")
KINDS = ("model", "exp_avg", "exp_avg_sq")
DATA = "tensors.bin"  # a rank's tensors, raw (tensors.py)
DTYPES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "uint8": 1, "int64": 8}


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
    if m.get("format") in PICKLED:
        raise CheckpointError(f"checkpoint file {file} has format {m['format']!r}: its shards are "
                              f"torch.distributed.checkpoint pickles, which run code when loaded; "
                              f"this parlab reads only {FORMAT!r} (raw tensors and JSON)")
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


def step_dir(directory: str | os.PathLike, step: int) -> Path:
    return Path(directory) / f"step-{step:08d}"


def complete_steps(directory: str | os.PathLike) -> list[int]:
    """Steps with a complete (renamed) checkpoint in ``directory``, ascending; partial ones
    (``step-N.partial``) are not listed."""
    d = Path(directory)
    if not d.is_dir():
        return []
    return sorted(int(m.group(1)) for p in d.iterdir() if p.is_dir() and (m := STEP.match(p.name)))
