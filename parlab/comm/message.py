"""The header every message carries, and the signature that lets a receiver catch mismatched calls.

A header is a fixed vector of ``HEADER_LEN`` int64 so that both backends can send it as is (the
local backend in its control frame, the torch backend as a tensor before the payload). Besides
what the payload is (kind, dtype, shape, bytes) it carries the sender's *signature*: which
collective it is in, that collective's sequence number on the communicator, and the arguments
every rank must agree on (input dtype and shape, reduce op, root, algorithm). A receiver
compares it with its own and raises ``CollectiveMismatch`` instead of reducing bytes that do not
belong together. Signatures travel encoded (``Signature.code``, a tuple of ints compared in one
step); they are decoded only to write the error message.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from parlab.costmodel.pricing.alphabeta import ALGORITHMS as _BY_OP

from .arrays import DTYPES, KINDS, MAX_NDIM, REDUCE_OPS
from .errors import CollectiveMismatch

OPS = ("p2p", "barrier", "broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter",
       "gather", "scatter", "all_to_all", "new_group")
# every algorithm name, numbered for the wire and the status table ("": point-to-point)
ALGORITHMS = ("", "native", *dict.fromkeys(a for names in _BY_OP.values() for a in names))
_MAGIC = 0x706C62  # "plb"
SIGNATURE_LEN = 7 + MAX_NDIM
HEADER_LEN = 6 + MAX_NDIM + SIGNATURE_LEN
_PAD = (0,) * MAX_NDIM
_KIND = {k: i for i, k in enumerate(KINDS)}
_DTYPE = {d: i + 1 for i, d in enumerate(DTYPES)}  # 0: none


@dataclass(frozen=True)
class Signature:
    """What all ranks of one collective call must agree on (point-to-point: op='p2p' only)."""

    op: str = "p2p"
    seq: int = 0
    dtype: str = ""
    shape: tuple[int, ...] = ()
    reduce: str = ""
    root: int = -1
    algorithm: str = ""

    def describe(self) -> str:
        if self.op == "p2p":
            return "point-to-point send/recv"
        parts = [f"shape {self.shape}", self.dtype]
        if self.reduce:
            parts.append(f"op {self.reduce}")
        if self.root >= 0:
            parts.append(f"root {self.root}")
        if self.algorithm:
            parts.append(f"algorithm {self.algorithm}")
        return f"{self.op} #{self.seq} ({', '.join(parts)})"

    @cached_property
    def code(self) -> tuple[int, ...]:
        """The signature as SIGNATURE_LEN integers."""
        return (OPS.index(self.op), self.seq, _DTYPE.get(self.dtype, 0), len(self.shape),
                REDUCE_OPS.index(self.reduce) + 1 if self.reduce else 0, self.root,
                ALGORITHMS.index(self.algorithm), *(self.shape + _PAD)[:MAX_NDIM])

    @classmethod
    def decode(cls, v) -> Signature:
        v = [int(a) for a in v]
        return cls(OPS[v[0]], v[1], DTYPES[v[2] - 1] if v[2] else "", tuple(v[7:7 + v[3]]),
                   REDUCE_OPS[v[4] - 1] if v[4] else "", v[5], ALGORITHMS[v[6]])

    def check(self, code: tuple[int, ...], me: int, peer: int) -> None:
        """Raise CollectiveMismatch unless ``code`` (rank ``peer``'s signature) equals this one."""
        if tuple(code) != self.code:
            raise CollectiveMismatch(
                f"rank {me} is in {self.describe()} but rank {peer} is in "
                f"{Signature.decode(code).describe()}: every rank of a group must call the same "
                f"collectives in the same order, with the same shape, dtype and arguments")


class Header(NamedTuple):
    """One message: its payload (kind, dtype, shape, nbytes), group context and signature code."""

    kind: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    ctx: int
    sig: tuple[int, ...]

    def encode(self) -> tuple[int, ...]:
        """The header as HEADER_LEN integers (int64 on the wire)."""
        return (_MAGIC, _KIND[self.kind], _DTYPE[self.dtype], len(self.shape), self.nbytes,
                self.ctx, *(self.shape + _PAD)[:MAX_NDIM], *self.sig)

    @classmethod
    def decode(cls, v) -> Header:
        """From HEADER_LEN integers (a tuple, a list, or an int64 tensor's ``tolist()``)."""
        if v[0] != _MAGIC:
            raise ValueError(f"not a parlab message header (magic {v[0]:#x})")
        return cls(KINDS[v[1]], DTYPES[v[2] - 1], tuple(v[6:6 + v[3]]), v[4], v[5],
                   tuple(v[6 + MAX_NDIM:]))
