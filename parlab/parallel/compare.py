"""DP, TP and PP side by side on one tiny model (guide 1.8): one training step of the same TinyGPT
on the same global batch under each strategy, on the same n ranks, measured (bytes of parameters,
gradients and AdamW states a rank holds, peak saved activations, bytes and messages it sends, the
step's seconds) and predicted by the cost model for the same setting (``trainer.predict.predict``:
``costmodel.plan_memory`` / ``memory`` for the model states, ``tensor_parallel`` and
``alphabeta.traffic`` for the bytes).

The engines are the chapters' own: ``DistributedDataParallel`` (chapter 03, one bucket),
``TensorParallelGPT`` (chapter 05, Megatron's f / g and the vocabulary-parallel ends) and the
pipeline executor ``run_schedule`` with a ``parlab.schedules`` schedule (chapter 04), each with
``make_optimizer`` (AdamW, fp32).

    with World(4) as world:
        per_rank = world.run(measure_all, CompareSetting())
    rows = model_state_rows(per_rank, CompareSetting())      # measured beside predicted

A pipeline rank builds the whole TinyGPT from the seed (``build_chunks``) but uses, updates and
keeps optimizer state for its own stage only; what it holds is counted over the parameters it
owns (``owned_params``), as a stage built alone would hold.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .data_parallel.ddp import DistributedDataParallel
from .dataset import batches
from .measure import SavedActivations, held_bytes
from .model import GPTConfig, TinyGPT, make_optimizer
from .pipeline_parallel.executor import run_schedule
from .pipeline_parallel.stage import build_chunks, owned_params, sync_tied_grads
from .tensor_parallel.transformer import TensorParallelGPT

STRATEGIES = ("dp", "tp", "pp")
NAMES = {"dp": "data parallel", "tp": "tensor parallel", "pp": "pipeline parallel"}
STATE_TERMS = ("parameters", "gradients", "optimizer states")


@dataclass(frozen=True)
class CompareSetting:
    """The tiny setting every strategy runs: the model, the global batch (``batch_size``
    sequences of ``config.seq_len``), the pipeline's micro-batches and schedule, the steps
    (the last one is measured; the first warms up)."""

    config: GPTConfig = field(default_factory=lambda: GPTConfig(n_layer=4, hidden=64))
    batch_size: int = 8
    micro_batches: int = 4
    schedule: str = "1f1b"
    steps: int = 2
    data_seed: int = 0

    def __post_init__(self) -> None:
        for name in ("batch_size", "micro_batches", "steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"CompareSetting.{name} must be a positive integer, got {value!r}")

    def plan(self, strategy: str, n: int):
        """The ``trainer.TrainPlan`` of ``strategy`` on ``n`` ranks (n-way DP, TP or PP)."""
        from .trainer.plan import TrainPlan

        check_strategy(strategy)
        m = self.micro_batches if strategy == "pp" else 1
        return TrainPlan(batch_size=self.batch_size, micro_batches=m, schedule=self.schedule,
                         data_seed=self.data_seed, **{strategy: n})


def check_strategy(strategy: object) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; allowed: {', '.join(STRATEGIES)}")
    return strategy  # type: ignore[return-value]


@dataclass
class Measured:
    """What one rank held and sent in the measured step of ``strategy``."""

    strategy: str
    rank: int
    memory: dict[str, int]        # parameters / gradients / optimizer states / activations (peak)
    traffic: dict[str, tuple[int, int, int]]  # op -> (calls, messages sent, bytes sent)
    seconds: float
    loss: float | None

    @property
    def bytes_sent(self) -> int:
        return sum(b for _, _, b in self.traffic.values())

    @property
    def messages(self) -> int:
        return sum(m for _, m, _ in self.traffic.values())


def _state(params: list[torch.nn.Parameter], opt: torch.optim.Optimizer) -> dict[str, int]:
    moments = [s[k] for s in opt.state.values() for k in ("exp_avg", "exp_avg_sq") if k in s]
    return held_bytes({"parameters": params, "gradients": [p.grad for p in params],
                       "optimizer states": moments})


def measure_strategy(comm, strategy: str, setting: CompareSetting) -> Measured:
    """Worker function: ``setting.steps`` steps of ``strategy`` on the ranks of ``comm`` (n-way);
    the last step measured: model states held after it, peak saved activations, traffic."""
    check_strategy(strategy)
    cfg, n, rank = setting.config, comm.world_size, comm.rank
    data = batches(setting.batch_size, cfg.seq_len, seed=setting.data_seed)
    if strategy == "dp":
        model = DistributedDataParallel(TinyGPT(cfg), comm, bucket_cap_mb=256)  # one bucket
        params = list(model.parameters())
    elif strategy == "tp":
        model = TensorParallelGPT(cfg, comm)
        params = list(model.parameters())
    else:
        from parlab.schedules import make_schedule

        schedule = make_schedule(setting.schedule, n, setting.micro_batches)
        model, chunks = build_chunks(cfg, n, schedule.v, rank)
        params = list(owned_params(model, chunks).values())
    opt = make_optimizer(params)
    loss, seconds, peak = None, 0.0, 0
    for _ in range(setting.steps):
        x, y = next(data)  # (B, s) the global batch, the same on every rank
        comm.reset_traffic()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if strategy == "pp":
            run = run_schedule(comm, schedule, model, chunks, x, y)
            sync_tied_grads(comm, model, n)
            loss, peak = run.loss, run.peak_bytes
        else:
            if strategy == "dp":  # this rank's block of rows: (B / n, s)
                b = setting.batch_size // n
                x, y = x[rank * b:(rank + 1) * b], y[rank * b:(rank + 1) * b]
            acts = SavedActivations(params)
            with acts.tag("step"):
                out = model(x, y)
            out.backward()
            loss, peak = float(out.detach()), acts.peak_bytes
        opt.step()
        seconds = time.perf_counter() - t0
    memory = {**_state(params, opt), "activations (peak saved)": peak}
    traffic = {op: (t.calls, t.msgs_sent, t.bytes_sent) for op, t in comm.traffic().items()
               if t.calls or t.msgs_sent}  # p2p: sends are messages, not collective calls
    return Measured(strategy, rank, memory, traffic, seconds, loss)


def measure_all(comm, setting: CompareSetting) -> dict[str, Measured]:
    """Worker function: ``measure_strategy`` for DP, TP and PP, one after another."""
    if setting.batch_size % comm.world_size:
        raise ValueError(f"the global batch must split over the ranks: batch_size={setting.batch_size} "
                         f"is not a multiple of n={comm.world_size}")
    return {s: measure_strategy(comm, s, setting) for s in STRATEGIES}


def predicted(strategy: str, n: int, rank: int, setting: CompareSetting,
              backend: str = "local") -> dict[str, dict[str, float]]:
    """The cost model's {"memory": {term: bytes}, "traffic": {op: bytes sent}} for ``rank`` of
    the n-way ``strategy`` in ``setting`` (summed over the groups; a pure strategy has one)."""
    from parlab.layout import Grid

    from .trainer.predict import predict

    plan = setting.plan(strategy, n)
    coords = tuple(Grid(dp=plan.dp, tp=plan.tp, pp=plan.pp).coords(rank))
    out = predict(setting.config, plan, coords, backend)
    traffic: dict[str, float] = {}
    for ops in out["traffic"].values():
        for op, nbytes in ops.items():
            traffic[op] = traffic.get(op, 0.0) + nbytes
    return {"memory": {k: out["memory"][k] for k in STATE_TERMS}, "traffic": traffic}


def model_state_rows(per_rank: list[dict[str, Measured]], setting: CompareSetting,
                     backend: str = "local") -> list[list]:
    """[strategy, rank, term, measured bytes, predicted bytes] for every rank and model-state
    term, then each rank's bytes sent per operation kind."""
    n, rows = len(per_rank), []
    for strategy in STRATEGIES:
        for rank, runs in enumerate(per_rank):
            got, want = runs[strategy], predicted(strategy, n, rank, setting, backend)
            for term in STATE_TERMS:
                rows.append([strategy, rank, term, got.memory[term], want["memory"][term]])
            for op in sorted(set(want["traffic"]) | {k for k in got.traffic}):
                rows.append([strategy, rank, f"{op} bytes sent", got.traffic.get(op, (0, 0, 0))[2],
                             want["traffic"].get(op, 0.0)])
    return rows


def agree(rows: list[list]) -> bool:
    """Every measured number equals its prediction (bytes are exact on the local backend)."""
    return all(r[3] == round(r[4]) for r in rows)


def summary_rows(per_rank: list[dict[str, Measured]], serial_params: int) -> list[list]:
    """Per strategy, the busiest rank: model-state bytes held (and as a share of one serial copy
    with its grads and AdamW states, 16 bytes per parameter in fp32), peak saved activations,
    collectives / messages / bytes sent per step, and which op kinds carried them."""
    rows = []
    whole = 16 * serial_params  # fp32 weights + grads + Adam m and v
    for s in STRATEGIES:
        runs = [r[s] for r in per_rank]
        states = max(sum(r.memory[t] for t in STATE_TERMS) for r in runs)
        acts = max(r.memory["activations (peak saved)"] for r in runs)
        busiest = max(runs, key=lambda r: r.bytes_sent)
        calls = sum(c for c, _, _ in busiest.traffic.values())
        ops = ", ".join(sorted(busiest.traffic)) or "none"
        rows.append([NAMES[s], states, states / whole, acts, calls, busiest.messages, busiest.bytes_sent, ops])
    return rows


def step_seconds(per_rank: list[dict[str, Measured]]) -> dict[str, float]:
    """The measured step's wall seconds per strategy (the slowest rank; varies run to run)."""
    return {s: max(r[s].seconds for r in per_rank) for s in STRATEGIES}


def same_loss(per_rank: list[dict[str, Measured]], atol: float = 1e-4) -> bool:
    """The three strategies computed the same loss for the measured step (within ``atol``): DP
    averages the per-rank losses of its blocks, TP reports it on every rank, PP on the last."""
    dp = sum(r["dp"].loss for r in per_rank) / len(per_rank)
    tp = per_rank[0]["tp"].loss
    pp = per_rank[-1]["pp"].loss
    return abs(dp - tp) <= atol and abs(pp - tp) <= atol


def real_model_rows(model: str = "llama-7b", kind: str = "dgx-a100", n: int = 8,
                    micro_batch: int = 1, global_batch: int = 64) -> list[list]:
    """The cost model on a real model: n-way DP, TP and PP of ``model`` on n GPUs of a ``kind``
    cluster (full recompute): [strategy, memory per GPU (GB), fits, step seconds, MFU, exposed
    communication seconds, bubble seconds]."""
    from parlab.costmodel import Plan, estimate, make_cluster

    cluster, rows = make_cluster(kind, n), []
    for s in STRATEGIES:
        plan = Plan(micro_batch=micro_batch, global_batch=global_batch, recompute="full", **{s: n})
        est = estimate(model, cluster, plan)
        t = est.time
        rows.append([NAMES[s], est.memory_total / 1e9, "yes" if est.fits else "no", t.total, est.mfu,
                     t.tp_comm + t.pp_comm + t.dp_comm, t.bubble])
    return rows
