"""TinyGPT with mixture-of-experts layers, its expert-parallel step and training, and the drops
measured against the capacity factor.

    spec = MoESpec(num_experts=4, top_k=2, expert_ffn=128, capacity_factor=1.25, gated=False, bias=True)
    serial = MoEGPT(GPTConfig(), spec, groups=2)           # the reference: 2 routing groups
    runs = launch(expert_parallel_step, 2, GPTConfig(), spec, x, y)   # experts over 2 ranks
    runs[0].loss, runs[0].all_to_all_bytes                 # = serial's, = the cost model's

Every layer from ``spec.dense_layers`` on has an ``MoE`` in place of its MLP (DeepSeek keeps the
first layers dense); the rest is TinyGPT (``parlab.parallel.model``), same seed, same weights.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import torch

from parlab.costmodel.pricing.expert_parallel import max_violation
from parlab.costmodel.specs.moe import MoESpec

from ..agree import check_loss, check_training, diverging
from ..model import INIT_STD, GPTConfig, TinyGPT, check_tokens, make_optimizer
from .layer import AUX_LOSS_COEF, MoE, MoEStats
from .parallel_layer import expert_parallel, finalize_grads

SEED_OFFSET = 7919  # the experts' generator: seed + this, so TinyGPT's own draws are unchanged


class MoEGPT(TinyGPT):
    """TinyGPT whose MLPs from layer ``spec.dense_layers`` on are MoE layers of ``spec``, routed
    in ``groups`` groups (= the expert-parallel degree it is the serial twin of)."""

    def __init__(self, config: GPTConfig | None = None, spec: MoESpec | None = None, groups: int = 1,
                 aux_loss_coef: float = AUX_LOSS_COEF):
        super().__init__(config)
        cfg = self.config
        if spec is None:
            raise ValueError("MoEGPT needs spec, a parlab.costmodel.pricing.expert_parallel.MoESpec")
        if spec.dense_layers >= cfg.n_layer:
            raise ValueError(f"MoESpec.dense_layers={spec.dense_layers} leaves no MoE layer in "
                             f"n_layer={cfg.n_layer}")
        self.spec = spec
        g = torch.Generator().manual_seed(cfg.seed + SEED_OFFSET)
        for block in list(self.blocks)[spec.dense_layers:]:
            block.mlp = MoE(spec, cfg.hidden, groups, aux_loss_coef)
            block.mlp.init_(INIT_STD, INIT_STD / math.sqrt(2 * cfg.n_layer), g)

    def moe_layers(self) -> list[MoE]:
        return [m for m in self.modules() if isinstance(m, MoE)]

    def stats(self) -> list[MoEStats]:
        """Each MoE layer's routing in the last forward."""
        return [m.stats for m in self.moe_layers()]


@dataclass
class ExpertParallelRun:
    """What one EP rank measured in one step: its loss (its own b/ep sequences), per MoE layer
    the load per expert and the drops of its tokens, the bytes its all-to-alls sent and received,
    and (``keep_grads``) its gradients after ``finalize_grads``."""

    rank: int
    loss: float
    stats: list[MoEStats]
    all_to_all_bytes: int
    all_to_all_recv: int
    all_to_all_calls: int
    routes: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)  # (expert, kept)
    grads: dict[str, torch.Tensor] = field(default_factory=dict)
    first_expert: int = 0


def check_batch(comm, config: GPTConfig, spec: MoESpec, x: torch.Tensor, y: torch.Tensor) -> int:
    """b / ep, the sequences each EP rank takes, after the batch's and the spec's rules."""
    check_tokens(x, config, y)
    ep = comm.world_size
    if spec.num_experts % ep:
        raise ValueError(f"ep={ep} ranks must divide num_experts={spec.num_experts}: each rank "
                         f"holds num_experts/ep whole experts")
    if x.shape[0] % ep:
        raise ValueError(f"the batch ({x.shape[0]} sequences) must split evenly over ep={ep} ranks")
    return x.shape[0] // ep


def expert_parallel_step(comm, config: GPTConfig, spec: MoESpec, x: torch.Tensor, y: torch.Tensor,
                         aux_loss_coef: float = AUX_LOSS_COEF, keep_grads: bool = False) -> ExpertParallelRun:
    """One forward and backward of MoEGPT with its experts over the ranks of ``comm``: rank r
    takes sequences r b/ep .. (r+1) b/ep - 1 of (x, y)."""
    n = check_batch(comm, config, spec, x, y)
    model = expert_parallel(MoEGPT(config, spec, 1, aux_loss_coef), comm)
    lo = comm.rank * n
    comm.reset_traffic()
    loss = model(x[lo:lo + n], y[lo:lo + n])
    loss.backward()
    a2a = comm.traffic().get("all_to_all")
    finalize_grads(model, comm)
    layers = model.moe_layers()
    return ExpertParallelRun(
        comm.rank, float(loss.detach()), model.stats(), a2a.bytes_sent if a2a else 0, a2a.bytes_recv if a2a else 0,
        a2a.calls if a2a else 0, [(m.routings[0].expert, m.routings[0].kept) for m in layers],
        {k: p.grad.clone() for k, p in model.named_parameters()} if keep_grads else {},
        layers[0].first_expert)


def train_expert_parallel(comm, config: GPTConfig, spec: MoESpec, batches: Iterable[tuple], steps: int,
                          lr: float = 3e-3, aux_loss_coef: float = AUX_LOSS_COEF) -> list[float]:
    """``steps`` AdamW steps of MoEGPT with expert parallelism on ``comm`` (rank r its share of
    each batch); returns each step's loss averaged over the ranks: ``train_reference`` of
    ``MoEGPT(config, spec, groups=ep)``'s. The arguments are ``agree.check_training``'s (the
    first ``steps`` batches, the same on every rank; checked before any step); a non-finite loss
    stops the run (FloatingPointError naming the step)."""
    taken = check_training(comm, "train_expert_parallel", batches, steps, lr)
    for x, y in taken:
        check_batch(comm, config, spec, x, y)
    model = expert_parallel(MoEGPT(config, spec, 1, aux_loss_coef), comm)
    opt = make_optimizer(model.parameters(), "adamw", lr)
    losses = []
    for step, (x, y) in enumerate(taken, start=1):
        n = x.shape[0] // comm.world_size
        lo = comm.rank * n
        opt.zero_grad(set_to_none=True)
        with diverging("train_expert_parallel", step):
            loss = model(x[lo:lo + n], y[lo:lo + n])
        loss.backward()
        finalize_grads(model, comm)
        opt.step()
        mean = float(comm.all_reduce(loss.detach().reshape(1))[0]) / comm.world_size
        losses.append(check_loss("train_expert_parallel", step, mean))
    return losses


@dataclass(frozen=True)
class DropRow:
    """At one capacity factor: slots per expert, the share of assignments dropped, and the
    busiest expert's excess over a balanced load (MaxVio) of the same routing."""

    capacity_factor: float
    capacity: int
    drop_fraction: float
    max_violation: float


@torch.no_grad()
def drops_vs_capacity(config: GPTConfig, spec: MoESpec, x: torch.Tensor,
                      factors: Sequence[float], groups: int = 1) -> list[DropRow]:
    """Route the tokens x (b, s) through MoEGPT (serial, ``groups`` groups) at each capacity
    factor and measure the drops in its first MoE layer (the router and the tokens are the same
    at every factor: only the capacity changes)."""
    rows = []
    for c in factors:
        model = MoEGPT(config, replace(spec, capacity_factor=c), groups)
        model(x)
        st = model.stats()[0]
        rows.append(DropRow(float(c), st.capacity, st.drop_fraction, max_violation(st.expert_load)))
    return rows
