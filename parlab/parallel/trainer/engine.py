"""The 3D trainer: the tiny GPT trained with any dp x tp x pp on any communicator (``train_3d``,
the engine behind the ``python -m parlab.train`` command line).

    from parlab.comm import launch
    from parlab.parallel.trainer import TrainPlan, train_3d

    plan = TrainPlan(dp=2, tp=2, pp=2, micro_batches=2, schedule="1f1b")
    reports = launch(train_3d, 8, GPTConfig(n_layer=2), plan, 3)     # 3 steps on 8 ranks
    reports[0].losses                  # the loss of every step (the same on every rank)
    reports[r].measured, reports[r].predicted    # per-rank bytes held and sent vs the cost model

Each rank (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM", Section 2): builds its TP, DP and PP groups from ``parlab.layout``
(``parallel.grid.ProcessGrid``: TP innermost, then DP, then PP, as Megatron-LM); holds the
pipeline pieces of its PP rank, each made of Megatron tensor-parallel blocks (``stage_tp``); runs
one synchronous ``parlab.schedules`` schedule per step over its PP group
(``pipeline_parallel.executor.run_schedule``: activations and gradients by p2p, the TP
collectives inside each op); sums the tied embedding's gradient between the first and last stage
(``pipeline_parallel.stage.sync_tied_grads``); averages the gradients over its DP group (one
all-reduce of one flat buffer, or ZeRO-1: ``zero1``); and applies AdamW to what it holds
(``zero.offload.ShardOptimizer``, elementwise: the shards' updates are the slices of the serial
update). Data: DP rank r takes its block of the same global batch (``dataset.batches(...,
rank=r, world=dp)``), so the loss of every step is the serial model's on the same batches, up
to float rounding (a sum reduced in another order). The plan and the reports: ``plan``.

What is measured on every rank, for one step (the last one), beside the prediction of the cost
model for the same setting (``predict``): bytes of parameters, gradients, optimizer states and
saved activations held, and bytes sent in each group: TP all-reduces, PP sends, DP all-reduce.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

import torch

from parlab.costmodel.specs._check import positive

from ..dataset import batches
from ..grid import ProcessGrid
from ..model import GPTConfig
from ..pipeline_parallel.executor import check_run, run_schedule
from ..pipeline_parallel.stage import owned_params, sync_tied_grads
from ..zero.offload import ShardOptimizer
from .plan import BETAS, EPS, Checkpointing, Fault, RankReport, StepLog, TrainingStopped, TrainPlan
from .predict import predict
from .stage_tp import build_tp_chunks


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
            from .zero1 import Zero1

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
        if not math.isfinite(loss):  # the same number on every rank: all stop here, unsaved
            raise TrainingStopped(f"the loss of step {trainer.step} is {loss} (not finite): the "
                                  f"run diverged and stopped (is --lr {plan.lr:g} too high?)")
        t = time.perf_counter()
        if checkpoint is not None and checkpoint.save_every and trainer.step % checkpoint.save_every == 0:
            from .checkpoint.sharded import save

            save(trainer, checkpoint.directory, run_id, fault=fault, save_every=checkpoint.save_every)
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
    this rank's ``RankReport``. A step whose loss is not finite raises ``TrainingStopped`` on
    every rank (the loss is the same number everywhere) before that step is saved."""
    positive("steps", steps, integer=True)
    trainer = Trainer(comm, config, plan, device)
    pg = trainer.pg
    report = RankReport(comm.rank, (pg.tp_rank, pg.dp_rank, pg.pp_rank), [], [])
    from .checkpoint.runs import owning

    with owning(comm, checkpoint, trainer.device) as run_id:  # the directory's lock and run id
        if checkpoint is not None and checkpoint.resume:
            from .checkpoint.sharded import load_latest

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
    from ..model import TinyGPT, train_reference

    data = batches(plan.batch_size, config.seq_len, plan.data_seed)
    return train_reference(TinyGPT(config), data, steps, lr=plan.lr, optimizer="adamw")
