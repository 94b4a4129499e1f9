"""A pipeline schedule as data: per stage, the ordered list of operations ``Op(kind, mb, chunk)``.

Kinds: ``F`` (forward), ``B`` (backward; the whole backward unless the schedule also has ``W``),
``W`` (weight gradient, split from ``B`` = input gradient by the zero-bubble schedules of Qi et
al. 2023, "Zero Bubble Pipeline Parallelism", Sec. 2). ``chunk`` is a model chunk; where chunk
``c`` of rank ``s`` sits in the model is the schedule's ``placement`` (``PLACEMENTS``):

- ``loop``: Megatron's interleaved schedule (Narayanan et al. 2021, Sec. 2.2): rank ``s`` holds
  chunks ``0..v-1``, chunk ``c`` is virtual stage ``c * p + s`` of the ``p * v`` the model is cut
  into (v = 1: one stage per rank);
- ``v``: the V shape of ZB-V (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", Sec. 6) and
  DualPipeV: v = 2, chunk 0 of rank ``s`` is virtual stage ``s``, chunk 1 is ``2p - 1 - s``, so
  the first and the last piece (the embedding and the loss) sit on rank 0;
- ``dual``: DualPipe's two pipelines in opposite directions (DeepSeek-AI 2024, "DeepSeek-V3
  Technical Report", Sec. 3.2.1): the model cut into p stages; micro-batches ``0..m/2-1`` run
  rank 0 -> p-1 on chunk 0 (rank ``s`` holds stage ``s``), micro-batches ``m/2..m-1`` run
  rank p-1 -> 0 on chunk 1 (rank ``s`` holds stage ``p - 1 - s``): every rank keeps two stages'
  parameters (2x), and each micro-batch visits one chunk per rank.

Pure Python: the simulator, the cost model, the Gantt charts and the executor
(``parlab.parallel.pipeline_parallel``) all read the same ``Schedule``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

KINDS = ("F", "B", "W")
#: How a schedule updates weights. ``flush``: synchronous, one optimizer step after all m
#: micro-batches drained (GPipe, 1F1B, interleaved, zero bubble). ``stash``: PipeDream's weight
#: stashing, an update after every backward (Narayanan et al. 2019). ``2bw``: PipeDream-2BW's
#: double-buffered weights, an update every ``update_every`` micro-batches (Narayanan et al. 2021,
#: "Memory-Efficient Pipeline-Parallel DNN Training"). See ``parlab.schedules.asynchronous``.
WEIGHT_POLICIES = ("flush", "stash", "2bw")
PLACEMENTS = ("loop", "v", "dual")


def check_count(name: str, value: object, minimum: int = 1) -> int:
    """``value`` if it is an int >= ``minimum``; else a ValueError naming ``name`` and the rule."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {name}={value}")
    return value


@dataclass(frozen=True, order=True)
class Op:
    """One operation of one stage: ``kind`` of micro-batch ``microbatch`` on model ``chunk``."""

    kind: str
    microbatch: int
    chunk: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Op kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        check_count("Op microbatch", self.microbatch, 0)
        check_count("Op chunk", self.chunk, 0)

    def label(self, v: int = 1) -> str:
        """``F3`` (micro-batch 3), or ``F3.1`` (chunk 1) when there are v > 1 chunks."""
        return f"{self.kind}{self.microbatch}" + (f".{self.chunk}" if v > 1 else "")

    def __str__(self) -> str:
        return f"{self.kind}(mb={self.microbatch}, chunk={self.chunk})"


@dataclass(frozen=True)
class Schedule:
    """``stages[s]`` is the ordered tuple of ops stage (rank) ``s`` runs, for p stages, m
    micro-batches and v chunks per stage.

    ``weights`` says how weights are updated (``WEIGHT_POLICIES``); ``update_every`` is the
    number of micro-batches per optimizer step (m for the synchronous ``flush`` schedules);
    ``placement`` where each rank's chunks sit in the model (``PLACEMENTS``).
    ``parlab.parallel.pipeline_parallel`` (the executor) runs only the synchronous schedules.
    """

    name: str
    p: int
    m: int
    v: int
    stages: tuple[tuple[Op, ...], ...]
    weights: str = "flush"
    update_every: int = 0  # 0: = m
    placement: str = "loop"
    overlapped: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        check_count("p (pipeline stages)", self.p)
        check_count("m (micro-batches)", self.m)
        check_count("v (model chunks per stage)", self.v)
        if self.weights not in WEIGHT_POLICIES:
            raise ValueError(f"weights must be one of {', '.join(WEIGHT_POLICIES)}, "
                             f"got {self.weights!r}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, "
                             f"got {self.placement!r}")
        if self.placement != "loop" and self.v != 2:
            raise ValueError(f"placement {self.placement!r} needs v=2 chunks per stage, got v={self.v}")
        if self.placement == "dual" and self.m % 2:
            raise ValueError(f"placement 'dual' needs an even m (half the micro-batches in each "
                             f"direction), got m={self.m}")
        object.__setattr__(self, "stages", tuple(tuple(ops) for ops in self.stages))
        object.__setattr__(self, "update_every", self.update_every or self.m)
        for s, ops in enumerate(self.stages):
            for i, op in enumerate(ops):
                if not isinstance(op, Op):
                    raise TypeError(f"schedule {self.name!r}: stage {s} position {i} is {op!r}, "
                                    f"not an Op")
        if len(self.stages) != self.p:
            raise ValueError(f"schedule {self.name!r} has {len(self.stages)} op lists for "
                             f"p={self.p} stages (one list per stage)")
        object.__setattr__(self, "overlapped", tuple(tuple(x) for x in self.overlapped))
        if self.overlapped and len(self.overlapped) != self.p:
            raise ValueError(f"schedule {self.name!r}: overlapped has {len(self.overlapped)} "
                             f"lists for p={self.p} stages (one list per stage, or none)")
        for s, starts in enumerate(self.overlapped):
            ops = self.stages[s]
            for i in starts:
                if not (0 <= i < len(ops) - 1 and ops[i].kind == "F" and ops[i + 1].kind == "B"):
                    raise ValueError(f"schedule {self.name!r}: stage {s} overlapped position {i} "
                                     f"must start an F then a B (an F&B pair)")

    def units(self, stage: int) -> list[tuple[int, ...]]:
        """Stage ``stage``'s ops as the units that start together: one op each, except an
        overlapped F&B pair (``overlapped``: F, B and the W right after it if the B is a full
        backward), which starts when both its forward input and its output gradient are there,
        as DualPipe launches one (DeepSeek-V3 report, Sec. 3.2.1, Fig. 4)."""
        ops, starts = self.stages[stage], set(self.overlapped[stage]) if self.overlapped else set()
        out, i = [], 0
        while i < len(ops):
            if i in starts:
                n = 3 if i + 2 < len(ops) and ops[i + 2] == Op("W", ops[i + 1].microbatch,
                                                              ops[i + 1].chunk) else 2
                out.append(tuple(range(i, i + n)))
                i += n
            else:
                out.append((i,))
                i += 1
        return out

    @property
    def split_backward(self) -> bool:
        """True when the backward is split into B (input gradient) and W (weight gradient)."""
        return any(op.kind == "W" for ops in self.stages for op in ops)

    @property
    def synchronous(self) -> bool:
        """True for the flush schedules: every micro-batch sees the same weights."""
        return self.weights == "flush"

    @property
    def depth(self) -> int:
        """Model pieces a micro-batch goes through: p v (p for ``dual``: each direction's p)."""
        return self.p if self.placement == "dual" else self.p * self.v

    @property
    def chunk_share(self) -> int:
        """How many chunks make one stage's share of the model: v (1 for ``dual``, whose
        chunks are each a whole stage of one of the two copies)."""
        return 1 if self.placement == "dual" else self.v

    @property
    def params_per_rank(self) -> Fraction:
        """Share of the model's parameters one rank keeps: v of p v pieces (1/p), or 2 of p for
        ``dual`` (two stages: DualPipe's 2x, DeepSeek-V3 report, Table 2)."""
        return Fraction(self.v, self.depth)

    def chunks_of(self, microbatch: int) -> tuple[int, ...]:
        """The chunks micro-batch ``microbatch`` runs on every rank: all v, or (``dual``) the
        one of its direction."""
        if self.placement == "dual":
            return (int(microbatch >= self.m // 2),)
        return tuple(range(self.v))

    def virtual_stage(self, stage: int, chunk: int) -> int:
        """Which of the ``depth`` model pieces (layers cut in order; 0 holds the embedding,
        ``depth - 1`` the loss) chunk ``chunk`` of rank ``stage`` is, which is also its position
        on its micro-batches' path: ``c * p + s`` (Megatron), ``s`` or ``2p - 1 - s`` (V),
        ``s`` or ``p - 1 - s`` (dual: the reverse direction enters at rank p - 1)."""
        if self.placement == "loop":
            return chunk * self.p + stage
        if chunk == 0:
            return stage
        return (2 * self.p if self.placement == "v" else self.p) - 1 - stage

    def place(self, virtual: int, chunk: int = 0) -> tuple[int, int]:
        """(stage, chunk) holding virtual stage ``virtual`` (for ``dual``, on the path of
        ``chunk``'s direction)."""
        if self.placement == "loop":
            return virtual % self.p, virtual // self.p
        if self.placement == "v":
            return (virtual, 0) if virtual < self.p else (2 * self.p - 1 - virtual, 1)
        return (virtual, 0) if chunk == 0 else (self.p - 1 - virtual, 1)

    def table(self) -> str:
        """One line per stage: ``stage 0: F0 F1 B0 ...`` (text form for the CLI and nbval)."""
        width = len(str(self.p - 1))
        return "\n".join(f"stage {s:>{width}}: " + " ".join(op.label(self.v) for op in ops)
                         for s, ops in enumerate(self.stages))
