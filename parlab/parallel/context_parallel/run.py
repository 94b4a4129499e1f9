"""Context parallelism run for real beside its references: ring attention, all-gather attention or
DeepSpeed-Ulysses on cp ranks against serial causal attention (outputs and gradients), the bytes each rank sent
against ``parlab.costmodel.pricing.context_parallel``'s formulas, and each rank's attention work.

    setting = CPSetting("ring", cp=4, balanced=True)
    result = run_context_parallel(setting)          # checks, then runs on 4 local ranks
    result.max_error, result.sent, result.predicted, result.work

Every rank draws the same Q, K, V and output gradient from the seed, computes the serial
reference (``model.causal_attention`` and torch autograd) itself, runs its part, and compares at
its own positions. Bytes are those the local backend counts (the torch backend's are nominal);
all-gather attention's are those of its own collectives (``GatherWork``), the layout check's
small all-gather left out. ``kv_heads`` < heads: grouped-query K, V (all-gather attention only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from parlab.costmodel.pricing.context_parallel import (
    LayerBytes,
    allgather_bytes,
    causal_work,
    check_ring,
    check_ulysses,
    ring_attention_bytes,
    ulysses_bytes,
)
from parlab.costmodel.specs._check import boolean, canonical, positive

from ..model import causal_attention
from .allgather import GatherWork, allgather_attention, repeat_kv
from .ring import RingWork, ring_attention
from .sequence import shard_sequence
from .ulysses import ulysses_attention

if TYPE_CHECKING:
    from parlab.comm import World

METHODS = ("ring", "ulysses", "all-gather")
DTYPE_BYTES = 4  # float32


@dataclass(frozen=True)
class CPSetting:
    """One attention layer's shapes (b sequences of s tokens, a heads of d; K, V with ``kv_heads``
    heads, None: a) split over ``cp`` ranks by ``method`` ('ring', 'ulysses' or 'all-gather';
    ``balanced``: the load-balanced causal split of the ring and all-gather attention)."""

    method: str = "ring"
    cp: int = 2
    batch: int = 2
    seq_len: int = 16
    heads: int = 4
    head_dim: int = 4
    balanced: bool = True
    seed: int = 0
    kv_heads: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", canonical("method", self.method, METHODS))
        for name in ("cp", "batch", "seq_len", "heads", "head_dim"):
            positive(f"CPSetting.{name}", getattr(self, name), integer=True)
        boolean("CPSetting.balanced", self.balanced)
        if self.kv_heads is not None:
            positive("CPSetting.kv_heads", self.kv_heads, integer=True)
            if self.heads % self.kv_heads:
                raise ValueError(f"CPSetting.kv_heads must divide heads (each K/V head serves heads / kv_heads "
                                 f"query heads): heads={self.heads}, kv_heads={self.kv_heads}")
            if self.kv_heads != self.heads and self.method != "all-gather":
                raise ValueError(f"grouped-query K, V (kv_heads={self.kv_heads} < heads={self.heads}) run with "
                                 f"method 'all-gather' here; {self.method} takes K, V of every head")
        if self.method == "ulysses":
            check_ulysses(self.heads, self.cp)
            if self.seq_len % self.cp:
                raise ValueError(f"DeepSpeed-Ulysses needs seq_len % cp == 0 (each rank holds s/cp "
                                 f"positions): seq_len={self.seq_len}, cp={self.cp}")
        else:
            check_ring(self.seq_len, self.cp, self.balanced, who=f"{self.method} attention")

    @property
    def split_balanced(self) -> bool:
        """Whether the ranks hold the balanced split (Ulysses: always the naive one)."""
        return self.balanced and self.method != "ulysses"

    def inputs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Q, K, V and the output's gradient, (b, a, s, d) each (K, V: (b, kv_heads, s, d)), the
        same on every rank."""
        gen = torch.Generator().manual_seed(self.seed)
        heads = (self.heads, self.kv_heads or self.heads, self.kv_heads or self.heads, self.heads)
        return tuple(torch.randn(self.batch, a, self.seq_len, self.head_dim, generator=gen) for a in heads)

    def predicted(self) -> LayerBytes:
        """The cost model's bytes per rank (``LayerBytes``) for this layer, float32."""
        h = self.heads * self.head_dim
        if self.method == "all-gather":
            return allgather_bytes(self.batch, self.seq_len, h, self.cp, self.heads, self.kv_heads,
                                   dtype_bytes=DTYPE_BYTES)
        if self.method == "ring":
            return ring_attention_bytes(self.batch, self.seq_len, h, self.cp, self.heads,
                                        dtype_bytes=DTYPE_BYTES)
        return ulysses_bytes(self.batch, self.seq_len, h, self.cp, self.heads, dtype_bytes=DTYPE_BYTES)


@dataclass(frozen=True)
class RankResult:
    """One rank: its largest |difference| from serial attention (output, dQ, dK, dV), what it
    sent in the forward and the backward (bytes, messages), and its work (ring, all-gather)."""

    rank: int
    errors: dict[str, float]
    sent: dict[str, tuple[int, int]]
    work: RingWork | GatherWork | None


def _sent(comm, op: str) -> tuple[int, int]:
    t = comm.traffic().get(op)
    return (t.bytes_sent, t.msgs_sent) if t is not None else (0, 0)


def cp_worker(comm, setting: CPSetting) -> RankResult:
    """Worker function (``launch(cp_worker, setting.cp, setting)``): one forward and backward of
    ``setting.method`` on this rank's part, compared with serial attention at its positions."""
    q, k, v, dout = setting.inputs()
    full = [t.clone().requires_grad_(True) for t in (q, k, v)]
    group = setting.heads // (setting.kv_heads or setting.heads)
    causal_attention(full[0], *(repeat_kv(t, group) for t in full[1:])).backward(dout)  # serial: (b, a, s, d)
    ref_out = causal_attention(q, repeat_kv(k, group), repeat_kv(v, group))
    r, cp, bal = comm.rank, comm.world_size, setting.split_balanced
    mine = [shard_sequence(t, r, cp, bal).requires_grad_(True) for t in (q, k, v)]  # (b, a, s/cp, d)
    op = "p2p" if setting.method == "ring" else "all_to_all"
    comm.reset_traffic()
    work = {"ring": RingWork, "all-gather": GatherWork}.get(setting.method, lambda: None)()
    if setting.method == "ring":
        out = ring_attention(*mine, comm, balanced=bal, work=work)
    elif setting.method == "all-gather":
        out = allgather_attention(*mine, comm, balanced=bal, work=work)
    else:
        out = ulysses_attention(*mine, comm)
    forward = work.forward if isinstance(work, GatherWork) else _sent(comm, op)
    comm.reset_traffic()
    out.backward(shard_sequence(dout, r, cp, bal))
    backward = work.backward if isinstance(work, GatherWork) else _sent(comm, op)
    errors = {"output": (out.detach() - shard_sequence(ref_out, r, cp, bal)).abs().max().item()}
    for name, part, whole in zip(("dQ", "dK", "dV"), mine, full, strict=True):
        errors[name] = (part.grad - shard_sequence(whole.grad, r, cp, bal)).abs().max().item()
    return RankResult(r, errors, {"forward": forward, "backward": backward}, work)


@dataclass(frozen=True)
class CPResult:
    """A run of ``setting`` on ``backend``: every rank's ``RankResult``; ``max_error`` over ranks
    and tensors; ``predicted`` the cost model's bytes per rank (``LayerBytes``)."""

    setting: CPSetting
    backend: str
    ranks: list[RankResult]

    @property
    def max_error(self) -> float:
        return max(e for r in self.ranks for e in r.errors.values())

    @property
    def predicted(self) -> LayerBytes:
        return self.setting.predicted()

    def bytes_match(self) -> bool:
        """Whether every rank sent exactly the predicted bytes, forward and backward."""
        p = self.predicted
        return all(r.sent["forward"][0] == p.forward and r.sent["backward"][0] == p.backward
                   for r in self.ranks)

    def work(self) -> tuple[int, ...]:
        """The attention scores each rank computed (ring, all-gather), beside ``causal_work``'s."""
        return tuple(r.work.scores for r in self.ranks if r.work is not None)

    def predicted_work(self) -> tuple[int, ...]:
        s = self.setting
        return causal_work(s.seq_len, s.cp, s.balanced) if s.method != "ulysses" else ()

    def work_rows(self) -> tuple[list[list[object]], list[str]]:
        """(rows, headers), ring only: per rank the attention scores it computed (counted as it
        ran), the cost model's count, the blocks, and the seconds it computed and waited."""
        rows = [[r.rank, r.work.scores, p, r.work.blocks, r.work.seconds, r.work.waited]
                for r, p in zip(self.ranks, self.predicted_work(), strict=True)]
        return rows, ["rank", "scores computed", "model", "blocks", "compute s", "wait s"]


def run_context_parallel(setting: CPSetting, backend: str = "local", world: World | None = None) -> CPResult:
    """Run ``setting`` on ``setting.cp`` ranks (a warm ``parlab.comm.World`` of that size if given,
    else a fresh launch); the setting's rules are checked before any rank starts."""
    if not isinstance(setting, CPSetting):
        raise TypeError(f"setting must be a CPSetting, got {type(setting).__name__}")
    if world is not None:
        if world.world_size != setting.cp:
            raise ValueError(f"the World has {world.world_size} ranks but cp={setting.cp}")
        results = world.run(cp_worker, setting)
        backend = world.backend
    else:
        from parlab.comm import launch

        results = launch(cp_worker, setting.cp, setting, backend=backend)
    return CPResult(setting, backend, list(results))
