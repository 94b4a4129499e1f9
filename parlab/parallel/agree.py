"""What the ranks of a group must agree on, checked once with one small all-gather; and the
arguments every parallel trainer takes (steps, lr, batches), checked in one place.

A collective whose ranks pass different shapes usually fails in the communicator
(``CollectiveMismatch``), but a choice that changes no message size does not: ring attention with
``balanced=True`` on one rank and ``False`` on another exchanges blocks of the same shape and
returns wrong numbers. So an algorithm that depends on such a choice gathers a few integers
describing it (``agree``) and every rank raises the same ``CollectiveMismatch`` naming the field
and each rank's value (as ``data_parallel.ddp.check_same_shapes`` does for a model's parameters,
and ``torch.distributed``'s ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` does for collectives' shapes).

    agree(comm, "ring_attention", {"balanced": True, "seq len per rank": 8, "dtype": torch.float32})
    taken = check_training(comm, "train_5d", batches, steps, lr)   # the batches it will use
    with diverging("train_5d", step):                              # a nan inside: one line
        ...
    check_loss("train_5d", step, loss)                              # stop at the first nan / inf
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from itertools import islice

import numpy as np
import torch

from parlab.comm.errors import CollectiveMismatch
from parlab.costmodel.specs._check import positive

#: torch dtypes by a code every process agrees on (their order here; the spelling is torch's)
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)

Value = bool | int | float | torch.dtype


def _encode(name: str, value: Value) -> int:
    """``value`` as one int64: an int as itself, a float by its bits, a dtype by its code."""
    if isinstance(value, torch.dtype):
        return DTYPES.index(value) if value in DTYPES else len(DTYPES)
    if isinstance(value, (bool, int, np.integer)):
        return int(value)
    if isinstance(value, float):
        return struct.unpack("<q", struct.pack("<d", value))[0]
    raise TypeError(f"agree: field {name!r} must be a bool, int, float or torch dtype, got {value!r}")


def _decode(like: Value, code: int) -> Value:
    """The value of another rank, read as this rank's ``like`` was encoded."""
    if isinstance(like, torch.dtype):
        return str(DTYPES[code]).removeprefix("torch.") if 0 <= code < len(DTYPES) else "another dtype"
    if isinstance(like, bool):
        return bool(code)
    if isinstance(like, float):
        return struct.unpack("<d", struct.pack("<q", code))[0]
    return code


def agree(comm, who: str, fields: Mapping[str, Value]) -> None:
    """Every rank of ``comm`` must pass the same ``fields`` (the same names, in the same order, on
    every rank: a call site's own dict); one all-gather of len(fields) int64. Raises
    ``CollectiveMismatch`` on every rank alike, naming the first field that differs and each
    rank's value. Nothing is sent on one rank."""
    if comm.world_size == 1:
        return
    names = list(fields)
    mine = np.array([_encode(n, fields[n]) for n in names], np.int64)
    every = np.asarray(comm.all_gather(mine)).reshape(comm.world_size, len(names))
    for j, name in enumerate(names):
        column = every[:, j]
        if (column != column[0]).any():
            values = ", ".join(f"rank {r} {_decode(fields[name], int(c))}" for r, c in enumerate(column))
            raise CollectiveMismatch(f"{who}: the ranks disagree on {name} ({values}); every rank "
                                     f"of the group must call it with the same {name}")


def digest(tensors: Iterable[torch.Tensor]) -> int:
    """A CRC-32 of the tensors' shapes, dtypes and bytes, in order: equal on two ranks (almost
    surely) only if the tensors are."""
    crc = 0
    for t in tensors:
        t = t.detach().cpu().contiguous()
        crc = zlib.crc32(f"{tuple(t.shape)}{t.dtype}".encode(), crc)
        crc = zlib.crc32(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"", crc)
    return crc


def check_training(comm, who: str, batches: Iterable[tuple], steps: int, lr: float) -> list[tuple]:
    """The arguments of a parallel trainer (``steps`` a positive int, ``lr`` finite and > 0), and
    the batches it trains on: the first ``steps`` (x, y) pairs of ``batches`` (an endless
    generator is fine), fewer is a ValueError before any step. Then, collectively over ``comm``
    (the trainer's whole world), every rank must have the same steps, lr and batches
    (``agree``: one CRC-32 of them all): ``CollectiveMismatch`` otherwise."""
    positive(f"{who} steps", steps, integer=True)
    positive(f"{who} lr", lr)
    if isinstance(batches, (torch.Tensor, str, bytes)) or not isinstance(batches, Iterable):
        raise TypeError(f"{who}: batches must be an iterable of (x, y) token-id tensor pairs, got "
                        f"{type(batches).__name__}")
    taken = list(islice(batches, steps))
    if len(taken) < steps:
        raise ValueError(f"{who}: batches holds {len(taken)} (x, y) pairs but steps={steps}: one "
                         f"batch per step")
    for i, pair in enumerate(taken):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                and all(isinstance(t, torch.Tensor) for t in pair)):
            raise TypeError(f"{who}: batch {i} must be an (x, y) pair of token-id tensors, got "
                            f"{type(pair).__name__}")
    agree(comm, who, {"steps": int(steps), "lr": float(lr),
                      "batches (CRC-32)": digest(t for pair in taken for t in pair)})
    return taken


def check_loss(who: str, step: int, loss: float) -> float:
    """``loss`` if finite; else FloatingPointError: training diverged at ``step`` (1-based). Call
    it with a loss every rank shares (all-reduced), so every rank stops alike."""
    if not math.isfinite(loss):
        raise FloatingPointError(f"{who}: training diverged at step {step}: the loss is {loss} (not "
                                 f"finite); lower lr or check the data")
    return loss


@contextmanager
def diverging(who: str, step: int) -> Iterator[None]:
    """Run a training step: a FloatingPointError inside it (a router's nan logits, ...) comes out
    as one line naming the trainer and the step."""
    try:
        yield
    except FloatingPointError as err:
        raise FloatingPointError(f"{who}: training diverged at step {step}: {err}") from err
