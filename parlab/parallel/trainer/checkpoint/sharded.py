"""Sharded checkpoints of a 3D run that lose nothing: each rank writes its own shard (raw
tensors and a JSON index: ``tensors``), a checkpoint is complete only once it is atomically
renamed, and any dp x tp x pp layout can load it (re-sharding).

    directory/
      step-00000004/                 complete: renamed from step-00000004.partial when done
        COMPLETE.json                manifest: run id, step, model shape, plan, optimizer,
                                     layout, each rank's SHARD.json hash; sealed by its sha256
        rank-00000/tensors.bin       one rank's tensors, raw bytes one after another
        rank-00000/SHARD.json        its run id, pieces (serial name, global offsets), the index
                                     of tensors.bin (dtype, shape, byte range), its sha256
      step-00000006.partial/         being written, or the run died while writing: never loaded
      LOCK                           flock'd by the run that owns the directory (owner.py)

Layout-independent form (as DCP's own ``ChunkStorageMetadata``, and Megatron's
``dist_checkpointing``): every tensor is stored under the serial TinyGPT's name as pieces with
their global offsets, so a rank of any grid finds the pieces covering its slice. A TP parameter
split along ``partition_dim`` in ``partition_stride`` groups (fused q | k | v: 3) is ``stride``
contiguous pieces per rank. Written once: replicas (DP ranks > 0, TP ranks > 0 of replicated
tensors, the last stage's copy of a tied embedding) write none. Saved: model weights, AdamW's
moments (the same pieces), the data position (steps done: ``dataset.batches`` is a pure function of
seed and position) and every rank's torch RNG state (restored on the same layout; TP needs
dropout 0, so training draws none).

Save protocol (every rank of the world, the run holding the directory's lock): rank 0 makes
``step-N.partial``; each rank writes its ``tensors.bin`` and ``SHARD.json`` (run id, sizes, sha256);
barrier; rank 0 checks every shard is this run's, writes ``COMPLETE.json`` (with each
SHARD.json's sha256; via a temporary file, fsync, rename) and renames the directory to
``step-N`` (POSIX rename is atomic); barrier. A run killed at any moment leaves either a complete
``step-N`` or a ``.partial`` one; a full disk is a ``CheckpointError`` saying ENOSPC, and the
earlier checkpoints are untouched. Loading takes the highest complete step and reads only what
the manifest vouches for (``files``), only once its pieces tile every tensor exactly
(``tiling``), and unpickles nothing: a missing, corrupt or edited file is a
``CheckpointError`` naming it, a checkpoint of another model shape, data stream or optimizer a
``ValueError`` naming the rule (``runs``): never a silent start from scratch.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ...tensor_parallel.layers import shard_strided
from ..stage_tp import stage_of
from .files import (
    DATA,
    FORMAT,
    KINDS,
    MANIFEST,
    PARTIAL,
    SHARD,
    CheckpointError,
    read_manifest,
    seal,
    sha256,
    write_json,
)
from .owner import _fresh_partial, _replace_final, write_error
from .runs import (
    check_compatible,
    complete_steps,
    latest_step,
    refuse_overwrite,
    run_fields,
    step_dir,
)
from .shards import read_shards, shard_entries, verify_checkpoint, verify_files
from .tensors import read_tensors, write_tensors
from .tiling import check_tiling

__all__ = ["FORMAT", "MANIFEST", "PARTIAL", "SHARD", "CheckpointError", "check_compatible",
           "complete_steps", "latest_step", "load", "load_latest", "read_checkpoint",
           "refuse_overwrite", "save", "step_dir", "verify_checkpoint"]


# ---------------------------------------------------------------------------- pieces
def pieces(p: torch.nn.Parameter, tp_rank: int, tp: int) -> list[tuple[tuple, list[int], list[int]]]:
    """This TP rank's parameter ``p`` as contiguous pieces of the full (serial) tensor:
    [(local index, global offsets, sizes)]. A split dim in ``stride`` groups gives ``stride``
    pieces (``tensor_parallel.layers.shard_strided``'s layout: the rank's block of every group, side by side)."""
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
def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- save
def optimizer_settings() -> dict:
    from ..plan import BETAS, EPS

    return {"betas": list(BETAS), "eps": EPS, "weight_decay": 0.0}


def save(trainer, directory: str | os.PathLike, run: str, fault=None, save_every: int = 0) -> Path:
    """Collective (every rank of ``trainer.comm``): checkpoint the trainer at its current step
    for run ``run`` (the directory's owner: ``runs.claim``). Returns the complete
    checkpoint's directory. ``save_every`` is recorded in the manifest, so that a resume that
    does not name it keeps saving as the run did (``runs.saved_every``)."""
    comm, step, plan = trainer.comm, trainer.step, trainer.plan
    final = step_dir(directory, step)
    partial = final.with_name(final.name + PARTIAL)
    if comm.rank == 0:
        Path(directory).mkdir(parents=True, exist_ok=True)
        _fresh_partial(partial)
    comm.barrier()
    mine = partial / f"rank-{comm.rank:05d}"
    state, table = {}, []
    tp_rank, tp = trainer.pg.tp_rank, plan.tp
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
    try:
        mine.mkdir()
        index = write_tensors(mine / DATA, state)
        data = mine / DATA
        files = {DATA: {"bytes": data.stat().st_size, "sha256": sha256(data)}}
        write_json(mine / SHARD, {"rank": comm.rank, "run": run, "coords": list(trainer.pg.coords),
                                  "pieces": table, "tensors": index, "files": files})
    except (OSError, RuntimeError) as err:
        raise write_error(err, mine, directory) from None
    if fault is not None:
        fault.hit(step, comm.rank, "save")
    comm.barrier()
    if comm.rank == 0:
        manifest = seal({
            "format": FORMAT, "run": run, "step": step, "world": comm.world_size, "save_every": save_every,
            "layout": {"dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "v": plan.v},
            **run_fields(trainer.config, plan, optimizer_settings()),
            "ranks": shard_entries(partial, comm.world_size, run)})
        try:
            write_json(partial / MANIFEST, manifest)
        except OSError as err:
            raise write_error(err, partial / MANIFEST, directory) from None
        _replace_final(final, run)
        os.rename(partial, final)  # atomic: from here on the checkpoint is complete
        _fsync_dir(Path(directory))
    comm.barrier()
    return final


# ---------------------------------------------------------------------------- load
def read_checkpoint(path: str | os.PathLike) -> tuple[dict, list[tuple[Path, dict]]]:
    """The checked manifest and each rank's (directory, checked SHARD.json) of a complete
    checkpoint (``files``: nothing outside it, every SHARD.json's hash matches; ``tiling``: its
    pieces tile every tensor exactly). Reads JSON only."""
    path = Path(path)
    manifest = read_manifest(path)
    shards = read_shards(path, manifest)
    check_tiling(path, shards)
    return manifest, shards


def _to_verify(shards: list[tuple[Path, dict]], sources: set[Path], rank: int, world: int,
               same_layout: bool) -> set[Path]:
    """The rank directories this rank hashes: those it reads (pieces; its RNG on the same
    layout) and every world-th one from its rank on, so every shard is verified by some rank."""
    dirs = set(sources) | {shards[i][0] for i in range(rank, len(shards), world)}
    if same_layout and rank < len(shards):
        dirs.add(shards[rank][0])
    return dirs


def load(trainer, path: str | os.PathLike) -> int:
    """Load the complete checkpoint at ``path`` into the trainer (any layout: each rank
    assembles the full tensors of its parameters from the pieces and keeps its slice).
    Returns the step it resumes at. Every rank calls it."""
    path = Path(path)
    manifest, shards = read_checkpoint(path)
    check_compatible(path, manifest, trainer.config, trainer.plan, optimizer_settings())
    plan, rank = trainer.plan, trainer.comm.rank
    tp_rank, tp = trainer.pg.tp_rank, plan.tp
    same = manifest["layout"] == {"dp": plan.dp, "tp": tp, "pp": plan.pp, "v": plan.v}
    wanted = set(trainer.params)
    found: dict[tuple[str, str], list[tuple[Path, dict]]] = {}
    for d, shard in shards:
        for piece in shard["pieces"]:
            if piece["name"] in wanted:
                found.setdefault((piece["kind"], piece["name"]), []).append((d, piece))
    dirs = sorted({d for entries in found.values() for d, _ in entries})
    check = _to_verify(shards, set(dirs), rank, trainer.comm.world_size, same)
    for d, shard in shards:
        if d in check:
            verify_files(d, shard)
    # read every needed piece: raw bytes by each source rank's (checked) index
    values: dict[tuple[Path, str], torch.Tensor] = {}
    index = dict(shards)
    for d in dirs:
        keys = [piece["key"] for entries in found.values() for src, piece in entries if src == d]
        values.update({(d, k): v for k, v in read_tensors(d / DATA, index[d]["tensors"], keys).items()})
    moments: dict[str, dict[str, torch.Tensor]] = {}
    with torch.no_grad():
        for name, p in trainer.params.items():
            moments[name] = {}
            for kind in KINDS:
                entries = found.get((kind, name))
                if not entries:
                    raise CheckpointError(f"checkpoint {path} has no {kind} pieces of parameter "
                                          f"{name!r} (files {path}/rank-*/{SHARD})")
                full = torch.zeros(entries[0][1]["shape"])  # tiled exactly (read_checkpoint)
                for d, piece in entries:
                    at = tuple(slice(o, o + s) for o, s in zip(piece["offsets"], piece["sizes"], strict=True))
                    full[at] = values[(d, piece["key"])]
                part = (full if getattr(p, "partition_dim", None) is None else
                        shard_strided(full, tp_rank, tp, p.partition_dim, p.partition_stride))
                if part.shape != p.shape:
                    raise ValueError(f"checkpoint {path}: {name} sliced for tp={tp} is "
                                     f"{tuple(part.shape)}, this rank's parameter {tuple(p.shape)}")
                if kind == "model":
                    p.copy_(part)
                else:
                    moments[name][kind] = part
    step = manifest["step"]
    trainer.load_moments(moments, step)
    if same:  # the RNG of this very rank (its directory verified above)
        key, (d, shard) = f"rng/{rank}", shards[rank]
        rng = read_tensors(d / DATA, shard["tensors"], [key])[key]
        if rng.shape != torch.get_rng_state().shape:
            raise CheckpointError(f"checkpoint file {d / SHARD}: tensor {key!r} is {rng.numel()} "
                                  f"bytes, torch's RNG state {torch.get_rng_state().numel()}")
        torch.set_rng_state(rng)
    trainer.step = step
    return step


def load_latest(trainer, directory: str | os.PathLike) -> int:
    """Resume from the highest complete checkpoint in ``directory`` (``latest_step``)."""
    return load(trainer, step_dir(directory, latest_step(directory)))
