"""A rank's tensors as raw bytes in one file, found by a JSON index in its ``SHARD.json``: the
idea of safetensors (https://github.com/huggingface/safetensors: a JSON header, then each
tensor's bytes). Reading a checkpoint parses JSON and copies bytes; it never unpickles, so
nothing a checkpoint directory holds can run code. (``torch.save`` files and the ``.metadata``
of ``torch.distributed.checkpoint`` are pickles: loading one from a directory someone else can
write runs whatever it holds.)

    index = write_tensors(d / DATA, {"model/wte.weight/0": t, ...})  # {key: {dtype, shape, at, bytes}}
    read_tensors(d / DATA, index, ["model/wte.weight/0"])           # {key: a new CPU tensor}

The index is checked before anything is read (``files.check_index``: every entry's dtype named,
its bytes its shape's, the entries tiling the file). Bytes are in this machine's order,
little-endian on every platform torch ships wheels for.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from .files import DTYPES, CheckpointError

TORCH_DTYPES = {name: getattr(torch, name) for name in DTYPES}


def write_tensors(path: Path, state: dict[str, torch.Tensor]) -> dict[str, dict]:
    """Write ``state``'s tensors one after another into a new file ``path`` (fsync'd); returns
    the index: each key's dtype, shape, byte offset ``at`` and length ``bytes``."""
    index, at = {}, 0
    names = {v: k for k, v in TORCH_DTYPES.items()}
    with open(path, "xb") as f:
        for key, t in state.items():
            if t.dtype not in names:
                raise TypeError(f"checkpoint tensor {key!r} has dtype {t.dtype}; a checkpoint holds "
                                f"only {', '.join(DTYPES)}")
            t = t.detach().to("cpu").contiguous()
            raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
            f.write(raw)
            index[key] = {"dtype": names[t.dtype], "shape": list(t.shape), "at": at, "bytes": len(raw)}
            at += len(raw)
        f.flush()
        os.fsync(f.fileno())
    return index


def read_tensors(path: Path, index: dict[str, dict], keys) -> dict[str, torch.Tensor]:
    """The tensors ``keys`` of file ``path`` by its (checked) ``index``: copies of their bytes."""
    out = {}
    with open(path, "rb") as f:
        for key in keys:
            entry = index.get(key)
            if entry is None:
                raise CheckpointError(f"checkpoint file {path} holds no tensor {key!r} (its "
                                      f"SHARD.json's index does not list it)")
            f.seek(entry["at"])
            raw = f.read(entry["bytes"])
            if len(raw) != entry["bytes"]:
                raise CheckpointError(f"checkpoint file {path} ends inside tensor {key!r}: "
                                      f"truncated or damaged")
            dtype = TORCH_DTYPES[entry["dtype"]]
            flat = (torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype) if raw else
                    torch.empty(0, dtype=dtype))
            out[key] = flat.reshape(entry["shape"])
    return out
