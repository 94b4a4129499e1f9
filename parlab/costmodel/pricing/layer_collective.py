"""One collective call of a transformer layer (``Collective``) and the elements its busiest rank
sends, in the convention of ``alphabeta.shape`` (``elements`` is the full buffer: the input of an
all-reduce, reduce-scatter, broadcast or reduce, the output of an all-gather), priced by the same
alpha-beta model as the rest of the cost model (Hockney 1994; Thakur, Rabenseifner & Gropp
2005, section 4)."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.pricing import alphabeta

PHASES = ("forward", "backward", "recompute", "step")


@dataclass(frozen=True)
class Collective:
    """``count`` calls of collective ``op`` on ``elements`` (the full buffer, as in
    ``alphabeta.shape``) among ``ranks`` GPUs, in ``phase`` (forward, backward, recompute; or
    step: once per training step, not per micro-batch), for ``what``."""

    phase: str
    op: str
    count: int
    elements: float
    ranks: int
    what: str = ""


def sent_elements(c: Collective, broadcast: str = "ring") -> float:
    """Elements the busiest rank sends in sequence for ``c``'s calls (alphabeta.shape)."""
    algo = broadcast if c.op in ("broadcast", "reduce") else "ring"
    return c.count * alphabeta.shape(c.op, algo, c.ranks, c.elements)[1]
