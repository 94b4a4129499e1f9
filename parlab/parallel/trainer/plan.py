"""What a 3D run is asked to do and what it reports: ``TrainPlan`` (the grid dp x tp x pp, the
batch, the pipeline schedule, ZeRO-1), the checkpointing and fault-injection settings, and the
per-step and per-rank records (``StepLog``, ``RankReport``) that ``engine.train_3d`` returns.

The grid is ``parlab.layout.Grid`` (Narayanan et al. 2021, Section 2: TP innermost, then DP,
then PP), the schedule one of ``parlab.schedules.SCHEDULES``.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field, replace

from parlab.costmodel.specs._check import positive
from parlab.layout import Grid, check_layout
from parlab.schedules import SCHEDULES, Schedule, make_schedule

from ..model import GPTConfig
from ..pipeline_parallel.executor import StageRun

BETAS, EPS = (0.9, 0.95), 1e-8  # make_optimizer('adamw')'s
PHASES = ("pipeline", "tied embedding", "dp all-reduce", "optimizer", "checkpoint")


@dataclass(frozen=True)
class TrainPlan:
    """How to train: the grid (dp x tp x pp), the global batch (sequences per step, split into
    dp blocks, each into ``micro_batches``), the pipeline schedule (one of
    ``parlab.schedules.SCHEDULES``; ``chunks`` per rank for 'interleaved'), AdamW's lr, ZeRO-1
    over DP, and the data stream's seed."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    batch_size: int = 8
    micro_batches: int = 2
    schedule: str = "1f1b"
    chunks: int = 2
    lr: float = 3e-3
    zero1: bool = False
    data_seed: int = 0

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "batch_size", "micro_batches", "chunks"):
            positive(f"TrainPlan.{name}", getattr(self, name), integer=True)
        positive("TrainPlan.lr", self.lr)
        key = str(self.schedule).lower().replace("_", "-")
        if key not in SCHEDULES:
            raise ValueError(f"TrainPlan.schedule must be one of {', '.join(SCHEDULES)}, got "
                             f"{self.schedule!r}")
        object.__setattr__(self, "schedule", key)

    @property
    def grid(self) -> Grid:
        return Grid(dp=self.dp, tp=self.tp, pp=self.pp)

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def v(self) -> int:
        """Model chunks per pipeline rank."""
        return self.chunks if self.schedule == "interleaved" else 1

    def make_schedule(self) -> Schedule:
        return make_schedule(self.schedule, self.pp, self.micro_batches, self.chunks)

    @property
    def micro_batch(self) -> int:
        """Sequences in one micro-batch of one DP rank."""
        return self.batch_size // self.dp // self.make_schedule().m

    def check(self, config: GPTConfig, world: int | None = None) -> TrainPlan:
        """The rules of a 3D run, as ValueErrors naming the rule and the values."""
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        if world is not None:
            self.grid.check(world=world)
        check_layout(dp=self.dp, tp=self.tp, pp=self.pp, batch_size=self.batch_size,
                     m=self.make_schedule().m, v=self.v, schedule=self.schedule,
                     n_layer=config.n_layer, n_head=config.n_head, hidden=config.hidden,
                     ffn=config.ffn, vocab_size=config.vocab_size, dropout=config.dropout)
        return self


@dataclass
class StepLog:
    """One step as rank 0 saw it: the loss (mean over the global batch), its wall time, tokens/s
    and the seconds of each phase (``PHASES``)."""

    step: int
    loss: float
    seconds: float
    tokens_per_s: float
    phases: dict[str, float]

    def line(self) -> str:
        times = " ".join(f"{k} {v * 1e3:.0f}ms" for k, v in self.phases.items() if v)
        return f"step {self.step} loss {self.loss:.4f} | {self.tokens_per_s:,.0f} tok/s | {times}"


@dataclass
class RankReport:
    """What one rank did: its coordinates, the loss of every step it ran (global: the same on
    every rank), the steps' logs, and for the last step what it held and sent (``measured``)
    beside the cost model's prediction (``predicted``), both {"memory": {term: bytes},
    "traffic": {group: {op: bytes sent}}}; ``start_step``: the step it resumed from."""

    rank: int
    coords: tuple[int, int, int]  # (tp, dp, pp)
    losses: list[float]
    logs: list[StepLog]
    measured: dict = field(default_factory=dict)
    predicted: dict = field(default_factory=dict)
    start_step: int = 0
    saved: list[int] = field(default_factory=list)  # steps checkpointed
    last_run: StageRun | None = None  # the last step's pipeline ops, spans, activations, sends


@dataclass(frozen=True)
class Checkpointing:
    """Save every ``save_every`` steps into ``directory`` (0: never); ``resume``: start from
    the latest complete checkpoint there (an error if there is none)."""

    directory: str
    save_every: int = 0
    resume: bool = False


@dataclass(frozen=True)
class Fault:
    """Fault injection (tests, the course): global rank ``rank`` SIGKILLs itself at step
    ``step`` (1-based), at its start (``during='step'``) or inside that step's checkpoint save
    after writing its own shard (``during='save'``)."""

    step: int
    rank: int = 0
    during: str = "step"

    def hit(self, step: int, rank: int, during: str) -> None:
        if (step, rank, during) == (self.step, self.rank, self.during):
            os.kill(os.getpid(), signal.SIGKILL)


class TrainingStopped(RuntimeError):
    """The run stopped itself, its message the one line ``python -m parlab.train`` prints: a
    loss that is no longer finite (nothing after it can be trusted, and it is never saved),
    or a step log that can no longer be written."""


def with_layout(plan: TrainPlan, dp: int, tp: int, pp: int) -> TrainPlan:
    """The same plan on another grid."""
    return replace(plan, dp=dp, tp=tp, pp=pp)
