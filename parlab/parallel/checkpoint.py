"""Sharded checkpoints of a 3D run that lose nothing: each rank writes its own shard with
``torch.distributed.checkpoint`` (DCP), a checkpoint is complete only once it is atomically
renamed, and any dp x tp x pp layout can load it (re-sharding).

    directory/
      step-00000004/                 complete: renamed from step-00000004.partial when done
        COMPLETE.json                manifest: step, model shape, plan, ranks, format
        rank-00000/                  one DCP checkpoint per rank (.metadata, __0_0.distcp)
        rank-00000/SHARD.json        its pieces (serial name, global offsets) and file hashes
      step-00000006.partial/         being written, or the run died while writing: never loaded

Layout-independent form (as DCP's own ``ChunkStorageMetadata``, and Megatron's
``dist_checkpointing``): every tensor is stored under the serial TinyGPT's name as pieces with
their global offsets, so a rank of any grid finds the pieces covering its slice. A TP parameter
split along ``partition_dim`` in ``partition_stride`` groups (fused q | k | v: 3) is ``stride``
contiguous pieces per rank. Written once: replicas (DP ranks > 0, TP ranks > 0 of replicated
tensors, the last stage's copy of a tied embedding) write none. Saved: model weights, AdamW's
moments (the same pieces), the data position (steps done: ``data.batches`` is a pure function of
seed and position) and every rank's torch RNG state (restored on the same layout; TP needs
dropout 0, so training draws none).

Save protocol (every rank of the world): rank 0 makes ``step-N.partial``; each rank writes its
DCP shard and ``SHARD.json`` (sizes, sha256); barrier; rank 0 writes ``COMPLETE.json`` (via a
temporary file, fsync, rename) and renames the directory to ``step-N`` (POSIX rename is atomic);
barrier. A run killed at any moment leaves either a complete ``step-N`` or a ``.partial`` one.
Loading takes the highest complete step; a missing or corrupt file is a ``CheckpointError``
naming it, a checkpoint of another model shape a ``ValueError`` naming the rule: never a silent
start from scratch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import warnings
from dataclasses import asdict
from pathlib import Path

import torch

from .stage_tp import stage_of
from .tensor import shard_strided

FORMAT = "parlab-3d-checkpoint/1"
MANIFEST = "COMPLETE.json"
SHARD = "SHARD.json"
PARTIAL = ".partial"
STEP = re.compile(r"^step-(\d{8})$")
SHAPE_FIELDS = ("vocab_size", "seq_len", "n_layer", "n_head", "hidden", "ffn_mult", "tie_embeddings")
DATA_FIELDS = ("batch_size", "data_seed")
KINDS = ("model", "exp_avg", "exp_avg_sq")


class CheckpointError(ValueError):
    """A checkpoint that is corrupt, partial or missing a file (the message names the file)."""


def step_dir(directory: str | os.PathLike, step: int) -> Path:
    return Path(directory) / f"step-{step:08d}"


def complete_steps(directory: str | os.PathLike) -> list[int]:
    """Steps with a complete (renamed) checkpoint in ``directory``, ascending; partial ones
    (``step-N.partial``) are not listed."""
    d = Path(directory)
    if not d.is_dir():
        return []
    return sorted(int(m.group(1)) for p in d.iterdir() if p.is_dir() and (m := STEP.match(p.name)))


# ---------------------------------------------------------------------------- pieces
def pieces(p: torch.nn.Parameter, tp_rank: int, tp: int) -> list[tuple[tuple, list[int], list[int]]]:
    """This TP rank's parameter ``p`` as contiguous pieces of the full (serial) tensor:
    [(local index, global offsets, sizes)]. A split dim in ``stride`` groups gives ``stride``
    pieces (``tensor.shard_strided``'s layout: the rank's block of every group, side by side)."""
    dim, stride = getattr(p, "partition_dim", None), getattr(p, "partition_stride", 1)
    sizes = list(p.shape)
    if dim is None:
        return [((), [0] * p.dim(), sizes)]
    per = p.shape[dim] // stride  # this rank's rows of one group
    out = []
    for g in range(stride):
        index = tuple([slice(None)] * dim + [slice(g * per, (g + 1) * per)])
        offsets = [0] * p.dim()
        offsets[dim] = g * per * tp + tp_rank * per  # group g starts at g * (full / stride)
        out.append((index, offsets, sizes[:dim] + [per] + sizes[dim + 1:]))
    return out


def full_shape(p: torch.nn.Parameter, tp: int) -> list[int]:
    shape, dim = list(p.shape), getattr(p, "partition_dim", None)
    if dim is not None:
        shape[dim] *= tp
    return shape


def writes(trainer, name: str, p: torch.nn.Parameter) -> bool:
    """Whether this rank writes parameter ``name`` (one copy of each piece in the checkpoint)."""
    pg, plan = trainer.pg, trainer.plan
    if pg.dp_rank != 0 or stage_of(name, trainer.config, plan.pp, plan.v) != pg.pp_rank:
        return False
    return getattr(p, "partition_dim", None) is not None or pg.tp_rank == 0




# ---------------------------------------------------------------------------- files
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_json(path: Path, obj: dict) -> None:
    """Write ``obj`` to ``path`` through a temporary file, fsync'd, then renamed."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint file {path} is missing (a partial or damaged "
                              f"checkpoint): cannot resume from it") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"checkpoint file {path} is corrupt (not valid JSON: {err})") from None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _dcp():
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")
    warnings.filterwarnings("ignore", message=".*assuming the intent is to")
    import torch.distributed.checkpoint as dcp

    return dcp


# ---------------------------------------------------------------------------- save
def save(trainer, directory: str | os.PathLike, fault=None) -> Path:
    """Collective (every rank of ``trainer.comm``): checkpoint the trainer at its current step.
    Returns the complete checkpoint's directory."""
    comm, step = trainer.comm, trainer.step
    final = step_dir(directory, step)
    partial = final.with_name(final.name + PARTIAL)
    if comm.rank == 0:
        Path(directory).mkdir(parents=True, exist_ok=True)
        if partial.exists():  # left by a run that died while writing it
            shutil.rmtree(partial)
        partial.mkdir()
    comm.barrier()
    mine = partial / f"rank-{comm.rank:05d}"
    mine.mkdir()
    state, table = {}, []
    tp_rank, tp = trainer.pg.tp_rank, trainer.plan.tp
    moments = trainer.moments()  # (collective with ZeRO-1)
    for name, p in trainer.params.items():
        if not writes(trainer, name, p):
            continue
        for kind, t in {"model": p.detach(), **moments[name]}.items():
            for i, (index, offsets, sizes) in enumerate(pieces(p, tp_rank, tp)):
                key = f"{kind}/{name}/{i}"
                state[key] = t[index].detach().to("cpu", copy=True).contiguous()
                table.append({"key": key, "kind": kind, "name": name, "shape": full_shape(p, tp),
                              "offsets": offsets, "sizes": sizes})
    state[f"rng/{comm.rank}"] = torch.get_rng_state()
    _dcp().save(state, storage_writer=_dcp().FileSystemWriter(str(mine)), no_dist=True)
    files = {f.name: {"bytes": f.stat().st_size, "sha256": _sha256(f)}
             for f in sorted(mine.iterdir()) if f.is_file()}
    _write_json(mine / SHARD, {"rank": comm.rank, "coords": list(trainer.pg.coords),
                               "pieces": table, "files": files})
    if fault is not None:
        fault.hit(step, comm.rank, "save")
    comm.barrier()
    if comm.rank == 0:
        plan = trainer.plan
        _write_json(partial / MANIFEST, {
            "format": FORMAT, "step": step, "world": comm.world_size,
            "layout": {"dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "v": plan.v},
            "config": asdict(trainer.config), "plan": {k: getattr(plan, k) for k in DATA_FIELDS},
            "ranks": [f"rank-{r:05d}" for r in range(comm.world_size)]})
        if final.exists():
            shutil.rmtree(final)
        os.rename(partial, final)  # atomic: from here on the checkpoint is complete
        _fsync_dir(Path(directory))
    comm.barrier()
    return final


# ---------------------------------------------------------------------------- load
def check_compatible(path: Path, manifest: dict, config, plan) -> None:
    """A checkpoint resumes the model shape and data stream it was saved from (any layout)."""
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


def read_checkpoint(path: Path) -> tuple[dict, list[tuple[Path, dict]]]:
    """The manifest and each rank's (directory, SHARD.json) of a complete checkpoint."""
    manifest = _read_json(path / MANIFEST)
    if manifest.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint file {path / MANIFEST} has format "
                              f"{manifest.get('format')!r}, expected {FORMAT!r}")
    shards = []
    for name in manifest.get("ranks", []):
        d = path / name
        shards.append((d, _read_json(d / SHARD)))
    return manifest, shards


def _verify(d: Path, shard: dict) -> None:
    for fname, info in shard["files"].items():
        f = d / fname
        if not f.is_file():
            raise CheckpointError(f"checkpoint file {f} is missing: the checkpoint is damaged")
        if f.stat().st_size != info["bytes"] or _sha256(f) != info["sha256"]:
            raise CheckpointError(f"checkpoint file {f} is corrupt: its size or sha256 differs "
                                  f"from what {d / SHARD} recorded when it was written")


def load(trainer, path: str | os.PathLike) -> int:
    """Load the complete checkpoint at ``path`` into the trainer (any layout: each rank
    assembles the full tensors of its parameters from the pieces and keeps its slice).
    Returns the step it resumes at. Every rank calls it."""
    path = Path(path)
    manifest, shards = read_checkpoint(path)
    check_compatible(path, manifest, trainer.config, trainer.plan)
    wanted = set(trainer.params)
    found: dict[tuple[str, str], list[tuple[Path, dict]]] = {}
    for d, shard in shards:
        for piece in shard["pieces"]:
            if piece["name"] in wanted:
                found.setdefault((piece["kind"], piece["name"]), []).append((d, piece))
    dirs = sorted({d for entries in found.values() for d, _ in entries})
    for d, shard in shards:
        if d in dirs:
            _verify(d, shard)
    # read every needed piece, one DCP load per source rank
    values: dict[tuple[Path, str], torch.Tensor] = {}
    dcp = _dcp()
    for d in dirs:
        request = {piece["key"]: torch.empty(piece["sizes"]) for entries in found.values()
                   for src, piece in entries if src == d}
        try:
            dcp.load(request, storage_reader=dcp.FileSystemReader(str(d)), no_dist=True)
        except Exception as err:  # DCP's own errors for a damaged file
            raise CheckpointError(f"checkpoint directory {d} could not be read: {err}") from None
        values.update({(d, k): v for k, v in request.items()})
    tp_rank, tp = trainer.pg.tp_rank, trainer.plan.tp
    moments: dict[str, dict[str, torch.Tensor]] = {}
    with torch.no_grad():
        for name, p in trainer.params.items():
            moments[name] = {}
            for kind in KINDS:
                entries = found.get((kind, name))
                if not entries:
                    raise CheckpointError(f"checkpoint {path} has no {kind} pieces of parameter "
                                          f"{name!r} (files {path}/rank-*/{SHARD})")
                full = torch.zeros(entries[0][1]["shape"])
                covered = 0
                for d, piece in entries:
                    index = tuple(slice(o, o + s) for o, s in zip(piece["offsets"], piece["sizes"], strict=True))
                    full[index] = values[(d, piece["key"])]
                    covered += values[(d, piece["key"])].numel()
                if covered != full.numel():
                    raise CheckpointError(f"checkpoint {path}: the pieces of {kind} {name!r} cover "
                                          f"{covered} of its {full.numel()} elements")
                part = (full if getattr(p, "partition_dim", None) is None else
                        shard_strided(full, tp_rank, tp, p.partition_dim, p.partition_stride))
                if part.shape != p.shape:
                    raise ValueError(f"checkpoint {path}: {name} sliced for tp={tp} is "
                                     f"{tuple(part.shape)}, this rank's parameter {tuple(p.shape)}")
                if kind == "model":
                    p.copy_(part)
                else:
                    moments[name][kind] = part
    step = int(manifest["step"])
    trainer.load_moments(moments, step)
    same = manifest["layout"] == {"dp": trainer.plan.dp, "tp": tp, "pp": trainer.plan.pp,
                                  "v": trainer.plan.v}
    if same:  # the RNG of this very rank
        rng = {f"rng/{trainer.comm.rank}": torch.get_rng_state()}
        dcp.load(rng, storage_reader=dcp.FileSystemReader(str(path / f"rank-{trainer.comm.rank:05d}")),
                 no_dist=True)
        torch.set_rng_state(rng[f"rng/{trainer.comm.rank}"])
    trainer.step = step
    return step


def latest_step(directory: str | os.PathLike) -> int:
    """The highest complete checkpoint's step in ``directory``; FileNotFoundError when there is
    none (partial checkpoints are never taken: a ``.partial`` directory is ignored)."""
    steps = complete_steps(directory)
    if not steps:
        partial = sorted(p.name for p in Path(directory).glob(f"step-*{PARTIAL}")) if Path(directory).is_dir() else []
        extra = f" (only partial ones, never loaded: {', '.join(partial)})" if partial else ""
        raise FileNotFoundError(f"--resume: no complete checkpoint in {directory}{extra}; "
                                f"refusing to start from scratch")
    return steps[-1]


def load_latest(trainer, directory: str | os.PathLike) -> int:
    """Resume from the highest complete checkpoint in ``directory`` (``latest_step``)."""
    return load(trainer, step_dir(directory, latest_step(directory)))


def refuse_overwrite(directory: str | os.PathLike) -> None:
    """A fresh run (no resume) must not write over an earlier run's checkpoints."""
    steps = complete_steps(directory)
    if steps:
        raise ValueError(f"checkpoint directory {directory} already holds checkpoints (latest: "
                         f"step {steps[-1]}): pass resume (--resume) to continue from it, or use "
                         f"an empty directory")
