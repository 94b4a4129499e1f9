"""The 3D trainer: the tiny GPT trained with any dp x tp x pp on any communicator.

    from parlab.comm import launch
    from parlab.parallel.train import TrainPlan, train_3d

    plan = TrainPlan(dp=2, tp=2, pp=2, micro_batches=2, schedule="1f1b")
    reports = launch(train_3d, 8, GPTConfig(n_layer=2), plan, 3)     # 3 steps on 8 ranks
    reports[0].losses                  # the loss of every step (the same on every rank)
    reports[r].measured, reports[r].predicted    # per-rank bytes held and sent vs the cost model

Each rank (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM", Section 2): builds its TP, DP and PP groups from ``parlab.layout``
(``grid.ProcessGrid``: TP innermost, then DP, then PP, as Megatron-LM); holds the pipeline
pieces of its PP rank, each made of Megatron tensor-parallel blocks (``stage_tp``); runs one
synchronous ``parlab.schedules`` schedule per step over its PP group (``pipeline.run_schedule``:
activations and gradients by p2p, the TP collectives inside each op); sums the tied
embedding's gradient between the first and last stage (``pipeline_stage.sync_tied_grads``);
averages the gradients over its DP group (one all-reduce of one flat buffer, or ZeRO-1); and
applies AdamW to what it holds (``offload.ShardOptimizer``, elementwise: the shards' updates
are the slices of the serial update). Data: DP rank r takes its block of the same global batch
(``data.batches(..., rank=r, world=dp)``), so the loss of every step is the serial model's on
the same batches, up to float rounding (a sum reduced in another order).

What is measured on every rank, for one step (the last one), beside the prediction of the cost
model for the same setting (``predict``): bytes of parameters, gradients, optimizer states and
saved activations held, and bytes sent in each group: TP all-reduces, PP sends, DP all-reduce.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from parlab.costmodel._check import positive
from parlab.layout import Grid
from parlab.schedules import SCHEDULES, Schedule, make_schedule
from parlab.train_checks import check_layout

from .data import batches
from .grid import ProcessGrid
from .model import GPTConfig
from .offload import ShardOptimizer
from .pipeline import StageRun, check_run, run_schedule
from .pipeline_stage import owned_params, sync_tied_grads
from .stage_tp import build_tp_chunks
from .train_predict import predict

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


class Trainer:
    """One rank's state of a 3D run: its groups, pieces, optimizer shards, data stream."""

    def __init__(self, comm, config: GPTConfig, plan: TrainPlan, device: str = "cpu"):
        self.comm, self.config, self.plan = comm, config, plan.check(config, comm.world_size)
        self.device = resolve_device(device)
        self.pg = ProcessGrid.build(comm, plan.grid)
        self.schedule = plan.make_schedule()
        self.model, self.chunks = build_tp_chunks(config, self.pg.tp_comm, plan.pp, plan.v,
                                                  self.pg.pp_rank)
        self.model.to(self.device)
        self.params = owned_params(self.model, self.chunks)  # serial name -> parameter
        self.zero = None
        if plan.zero1 and plan.dp > 1:
            from .train_zero import Zero1

            self.zero = Zero1(list(self.params.values()), self.pg.dp_comm, plan.lr, BETAS, EPS)
            self.optim = {}
        else:
            self.optim = {name: ShardOptimizer(p.data.view(-1), lr=plan.lr, betas=BETAS, eps=EPS,
                                               weight_decay=0.0) for name, p in self.params.items()}
        self.step = 0  # steps done

    def data(self):
        """This DP rank's batch stream, advanced past the steps already done."""
        stream = batches(self.plan.batch_size, self.config.seq_len, self.plan.data_seed,
                         rank=self.pg.dp_rank, world=self.plan.dp)
        for _ in range(self.step):
            next(stream)
        for x, y in stream:
            yield x.to(self.device), y.to(self.device)

    def train_step(self, x: torch.Tensor, y: torch.Tensor):
        """One step on this rank's block (x, y) of the global batch: the schedule, the tied
        embedding's gradient, the DP average, AdamW. Returns (StageRun, phase seconds)."""
        pg, clock = self.pg, {}
        check_run(pg.pp_comm, self.schedule, self.config, x)
        for p in self.params.values():
            p.grad = None
        t0 = time.perf_counter()
        run = run_schedule(pg.pp_comm, self.schedule, self.model, self.chunks, x, y)
        t1 = time.perf_counter()
        sync_tied_grads(pg.pp_comm, self.model, self.plan.pp)
        t2 = time.perf_counter()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params.values()]
        if self.zero is not None:
            self.zero.step(grads)  # reduce-scatter, Adam on the shard, all-gather
            t3 = t4 = time.perf_counter()
        else:
            if self.plan.dp > 1:
                flat = torch.cat([g.reshape(-1) for g in grads])  # (N_rank,)
                pg.dp_comm.all_reduce(flat, inplace=True)
                flat.div_(self.plan.dp)
                grads = list(torch.split(flat, [g.numel() for g in grads]))
            t3 = time.perf_counter()
            for opt, g in zip(self.optim.values(), grads, strict=True):
                opt.step(g.reshape(-1))
            t4 = time.perf_counter()
        clock.update({"pipeline": t1 - t0, "tied embedding": t2 - t1, "dp all-reduce": t3 - t2,
                      "optimizer": t4 - t3})
        self.step += 1
        return run, clock

    def global_loss(self, run) -> float:
        """The step's loss over the global batch, on every rank: the last stage's TP rank 0 of
        each replica contributes its replica's loss / dp (one world all-reduce of one number)."""
        pg = self.pg
        mine = run.loss / self.plan.dp if pg.is_last_stage and pg.tp_rank == 0 else 0.0
        return float(self.comm.all_reduce(torch.tensor([mine], dtype=torch.float64, device=self.device))[0])

    # ------------------------------------------------------------------ optimizer state
    def moments(self) -> dict[str, dict[str, torch.Tensor]]:
        """AdamW's moments of every parameter, in its shape: {name: {"exp_avg", "exp_avg_sq"}}
        (with ZeRO-1 a collective over DP: the blocks are all-gathered)."""
        if self.zero is None:
            return {name: {"exp_avg": o.exp_avg.view(p.shape), "exp_avg_sq": o.exp_avg_sq.view(p.shape)}
                    for (name, p), o in zip(self.params.items(), self.optim.values(), strict=True)}
        flats = self.zero.full_moments()
        out, offset = {}, 0
        for name, p in self.params.items():
            n = p.numel()
            out[name] = {k: f[offset:offset + n].view(p.shape) for k, f in zip(("exp_avg", "exp_avg_sq"), flats, strict=True)}
            offset += n
        return out

    @torch.no_grad()
    def load_moments(self, moments: dict[str, dict[str, torch.Tensor]], step: int) -> None:
        """Set AdamW's moments (full per-parameter tensors of this rank's shapes) and step count."""
        if self.zero is None:
            for (name, p), o in zip(self.params.items(), self.optim.values(), strict=True):
                o.exp_avg.view(p.shape).copy_(moments[name]["exp_avg"])
                o.exp_avg_sq.view(p.shape).copy_(moments[name]["exp_avg_sq"])
                o.step_count = step
            return
        flat = [torch.cat([moments[name][k].reshape(-1) for name in self.params]) for k in ("exp_avg", "exp_avg_sq")]
        self.zero.load_moments(*flat, step)

    # ------------------------------------------------------------------ measurement
    def held(self, run) -> dict[str, int]:
        """Bytes this rank holds: parameters, gradients, optimizer states, peak saved activations."""
        params = sum(p.numel() * p.element_size() for p in self.params.values())
        states = (self.zero.state_bytes() if self.zero is not None else
                  sum(t.numel() * t.element_size() for o in self.optim.values()
                      for t in (o.exp_avg, o.exp_avg_sq)))
        grads = sum(p.grad.numel() * p.grad.element_size() for p in self.params.values()
                    if p.grad is not None)
        return {"parameters": params, "gradients": grads, "optimizer states": states,
                "activations (peak)": run.peak_bytes, "micro-batches in flight": run.peak_held}

    def sent(self) -> dict[str, dict[str, int]]:
        """Bytes this rank sent in each group since the last reset, by operation."""
        return {dim: {op: t.bytes_sent for op, t in ops.items() if t.bytes_sent}
                for dim, ops in self.pg.traffic().items()}


def _train_loop(trainer: Trainer, report: RankReport, steps: int, checkpoint, run_id,
                on_step, fault):
    """train_3d's steps, from ``trainer.step`` to ``steps``; the last step's StageRun (or None)."""
    comm, plan, config, run = trainer.comm, trainer.plan, trainer.config, None
    data = trainer.data()
    tokens = plan.batch_size * config.seq_len
    while trainer.step < steps:
        if fault is not None:
            fault.hit(trainer.step + 1, comm.rank, "step")
        x, y = next(data)
        trainer.pg.reset_traffic()
        start = time.perf_counter()
        run, phases = trainer.train_step(x, y)
        measured = {"memory": trainer.held(run), "traffic": trainer.sent()}
        loss = trainer.global_loss(run)
        t = time.perf_counter()
        if checkpoint is not None and checkpoint.save_every and trainer.step % checkpoint.save_every == 0:
            from .checkpoint import save

            save(trainer, checkpoint.directory, run_id, fault=fault)
            report.saved.append(trainer.step)
        phases["checkpoint"] = time.perf_counter() - t
        seconds = time.perf_counter() - start
        log = StepLog(trainer.step, loss, seconds, tokens / seconds, phases)
        report.losses.append(loss)
        report.logs.append(log)
        report.measured = measured
        if on_step is not None and comm.rank == 0:
            on_step(log)
    return run


def train_3d(comm, config: GPTConfig, plan: TrainPlan, steps: int,
             checkpoint: Checkpointing | None = None, on_step: Callable[[StepLog], None] | None = None,
             fault: Fault | None = None, device: str = "cpu") -> RankReport:
    """Worker function (``launch(train_3d, plan.world, config, plan, steps)``): train until
    ``steps`` steps are done (resuming from a checkpoint if asked), saving every
    ``checkpoint.save_every`` steps; ``on_step`` is called on rank 0 after each step;
    ``device`` 'cuda' puts this rank's pieces on its GPU (under torchrun with NCCL). Returns
    this rank's ``RankReport``."""
    positive("steps", steps, integer=True)
    trainer = Trainer(comm, config, plan, device)
    pg = trainer.pg
    report = RankReport(comm.rank, (pg.tp_rank, pg.dp_rank, pg.pp_rank), [], [])
    from .checkpoint_run import owning

    with owning(comm, checkpoint, trainer.device) as run_id:  # the directory's lock and run id
        if checkpoint is not None and checkpoint.resume:
            from .checkpoint import load_latest

            load_latest(trainer, checkpoint.directory)
            report.start_step = trainer.step
        run = _train_loop(trainer, report, steps, checkpoint, run_id, on_step, fault)
    if run is not None:
        report.predicted = predict(config, plan, pg.coords, comm.backend)
        report.last_run = run
    return report


def resolve_device(device: str) -> torch.device:
    """'cpu', or 'cuda': this process's GPU (LOCAL_RANK under torchrun)."""
    if device == "cpu":
        return torch.device("cpu")
    if device != "cuda":
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if not torch.cuda.is_available():
        raise ValueError("device='cuda' but torch sees no CUDA device on this machine")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())


def serial_losses(config: GPTConfig, plan: TrainPlan, steps: int) -> list[float]:
    """The single-process reference for ``plan``'s data: ``model.train_reference`` with AdamW at
    ``plan.lr`` on the full global batches."""
    from .model import TinyGPT, train_reference

    data = batches(plan.batch_size, config.seq_len, plan.data_seed)
    return train_reference(TinyGPT(config), data, steps, lr=plan.lr, optimizer="adamw")


def with_layout(plan: TrainPlan, dp: int, tp: int, pp: int) -> TrainPlan:
    """The same plan on another grid."""
    return replace(plan, dp=dp, tp=tp, pp=pp)
