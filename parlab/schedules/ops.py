"""A pipeline schedule as data: per stage, the ordered list of operations ``Op(kind, mb, chunk)``.

Kinds: ``F`` (forward), ``B`` (backward; the whole backward unless the schedule also has ``W``),
``W`` (weight gradient, split from ``B`` = input gradient by the zero-bubble schedules of Qi et
al. 2023, "Zero Bubble Pipeline Parallelism", Sec. 2). ``chunk`` is the model chunk of Megatron's
interleaved schedule (Narayanan et al. 2021, Sec. 2.2): rank ``s`` holds chunks ``0..v-1``, and
chunk ``c`` of rank ``s`` is virtual stage ``c * p + s`` of the ``p * v`` the model is cut into.

Pure Python: the simulator, the cost model, the Gantt charts and the executor
(``parlab.parallel.pipeline_parallel``) all read the same ``Schedule``.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("F", "B", "W")
#: How a schedule updates weights. ``flush``: synchronous, one optimizer step after all m
#: micro-batches drained (GPipe, 1F1B, interleaved, zero bubble). ``stash``: PipeDream's weight
#: stashing, an update after every backward (Narayanan et al. 2019). ``2bw``: PipeDream-2BW's
#: double-buffered weights, an update every ``update_every`` micro-batches (Narayanan et al. 2021,
#: "Memory-Efficient Pipeline-Parallel DNN Training"). See ``parlab.schedules.asynchronous``.
WEIGHT_POLICIES = ("flush", "stash", "2bw")


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
    number of micro-batches per optimizer step (m for the synchronous ``flush`` schedules).
    ``parlab.parallel.pipeline_parallel`` (the executor) runs only the synchronous schedules.
    """

    name: str
    p: int
    m: int
    v: int
    stages: tuple[tuple[Op, ...], ...]
    weights: str = "flush"
    update_every: int = 0  # 0: = m

    def __post_init__(self) -> None:
        check_count("p (pipeline stages)", self.p)
        check_count("m (micro-batches)", self.m)
        check_count("v (model chunks per stage)", self.v)
        if self.weights not in WEIGHT_POLICIES:
            raise ValueError(f"weights must be one of {', '.join(WEIGHT_POLICIES)}, "
                             f"got {self.weights!r}")
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

    @property
    def split_backward(self) -> bool:
        """True when the backward is split into B (input gradient) and W (weight gradient)."""
        return any(op.kind == "W" for ops in self.stages for op in ops)

    @property
    def synchronous(self) -> bool:
        """True for the flush schedules: every micro-batch sees the same weights."""
        return self.weights == "flush"

    def virtual_stage(self, stage: int, chunk: int) -> int:
        """Index of chunk ``chunk`` of rank ``stage`` among the p*v model pieces (Megatron)."""
        return chunk * self.p + stage

    def place(self, virtual: int) -> tuple[int, int]:
        """(stage, chunk) holding virtual stage ``virtual``."""
        return virtual % self.p, virtual // self.p

    def table(self) -> str:
        """One line per stage: ``stage 0: F0 F1 B0 ...`` (text form for the CLI and nbval)."""
        width = len(str(self.p - 1))
        return "\n".join(f"stage {s:>{width}}: " + " ".join(op.label(self.v) for op in ops)
                         for s, ops in enumerate(self.stages))
