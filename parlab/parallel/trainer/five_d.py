"""5D: the MoE TinyGPT trained with DP x TP x PP x CP x EP at once (beyond the guide; chapter 13).

    grid = Grid(dp=2, tp=2, pp=2, cp=2, ep=2)                # 16 ranks, Megatron-Core's order
    losses = launch(train_5d, 16, config, spec, grid, batches, steps=2)[0]
    # = train_reference(MoEGPT(config, spec, aux_loss_coef=0), batches, 2, optimizer="sgd")

Each rank (``parlab.layout.Grid``: tp fastest, then cp, dp, pp; the experts over ep of the
dp x cp ranks of its TP/PP position, Megatron-Core's expert grid) holds:
- TP: the Megatron shards of attention (heads) and of the dense MLPs, vocabulary-parallel
  embedding and cross-entropy (``tensor_parallel``);
- CP: its positions of the load-balanced causal split (chunks r and 2 cp - 1 - r,
  ``context_parallel.shard_sequence``), attention by ring attention over the CP group, the
  position embedding of its own positions;
- EP: the routed experts of its EP group rank (``ExpertParallelMoE``, all-to-all over the EP
  group), the same on every TP rank of its TP group (the MoE sees the full hidden state after
  attention's all-reduce: expert tensor parallelism is not done);
- PP: its stage of the layers, run by the pipeline executor with any loop-placement schedule;
- DP: its block of the global batch.

After each step: the tied embedding summed over the first and last stage, the dense gradients
averaged over the dp x cp ranks (Megatron-Core's "dp-cp" group), each expert's summed over its
expert-data-parallel replicas and divided by dp x cp (it already sums the EP group's tokens),
then plain SGD. The serial twin routes every token alone (dropless, ``capacity_factor=0``) with
no auxiliary loss: routing groups differ between the runs (a rank's tokens under CP are not a
contiguous block), and a dropless layer's outputs, unlike its capacity drops and its aux loss,
do not depend on the groups. So the losses equal the serial ones up to float rounding.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from parlab.costmodel.pricing.context_parallel import rank_positions
from parlab.costmodel.specs._check import instance
from parlab.costmodel.specs.moe import MoESpec
from parlab.layout import Grid

from ..agree import check_loss, check_training, diverging
from ..context_parallel.ring import ring_attention
from ..expert_parallel import ExpertParallelMoE, MoEGPT, is_expert_param
from ..model import GPTConfig, check_tokens, merge_heads, split_heads
from ..pipeline_parallel.executor import check_run, run_schedule
from ..pipeline_parallel.stage import owned_params, split_layers, sync_tied_grads
from ..tensor_parallel.cross_entropy import vocab_parallel_cross_entropy
from ..tensor_parallel.transformer import ParallelAttention, TensorParallelGPT
from .stage_tp import TensorParallelChunk

DIMS = ("tp", "cp", "dp", "pp", "dp-cp")
EXPERT_DIMS = ("ep", "edp")


def build_groups(comm, grid: Grid) -> dict[str, object]:
    """This rank's communicator of every dense and expert group of ``grid`` (made collectively,
    the same calls in the same order on every rank)."""
    grid.check(world=comm.world_size)
    mine = {}
    for dim in DIMS + EXPERT_DIMS:
        seen = set()
        for r in range(grid.world):
            ranks = grid.expert_group(dim, r) if dim in EXPERT_DIMS else grid.group(dim, r)
            if ranks in seen:
                continue
            seen.add(ranks)
            group = comm.new_group(list(ranks))
            if comm.rank in ranks:
                mine[dim] = group
    return mine


class RingParallelAttention(nn.Module):
    """``ParallelAttention`` (heads over TP) with ring attention over the CP group for the core."""

    def __init__(self, attn: ParallelAttention, cp_comm):
        super().__init__()
        self.qkv, self.proj, self.local_heads, self.cp_comm = attn.qkv, attn.proj, attn.local_heads, cp_comm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = split_heads(self.qkv(x), self.local_heads)  # (b, a/t, s/cp, d) each
        return self.proj(merge_heads(ring_attention(q, k, v, self.cp_comm, balanced=True)))  # (b, s/cp, h)


class FiveDChunk(TensorParallelChunk):
    """A TP pipeline piece whose first stage embeds this CP rank's ``positions``."""

    def __init__(self, model: TensorParallelGPT, u: int, n_virtual: int, positions: torch.Tensor):
        super().__init__(model, u, n_virtual)
        self.positions = positions

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        if self.first:  # (b, s/cp) ids at this rank's positions -> (b, s/cp, h)
            x = self.wte(x) + self.wpe(self.positions)
        for block in self.blocks:
            x = block(x)
        if not self.last:
            return x
        logits = self.lm_head(self.ln_f(x))  # (b, s/cp, V/t)
        return vocab_parallel_cross_entropy(logits, targets, self.comm).mean()


def build_model(config: GPTConfig, spec: MoESpec, grid: Grid, groups: dict, rank: int):
    """The rank's 5D model (the serial MoEGPT's weights, sliced) and its pipeline chunks."""
    if spec.capacity_factor:
        raise ValueError(f"train_5d runs dropless experts (capacity_factor=0: outputs independent of "
                         f"the routing groups), got capacity_factor={spec.capacity_factor}")
    serial = MoEGPT(config, spec, aux_loss_coef=0.0)  # its non-MoE weights are TinyGPT(config)'s
    model = TensorParallelGPT(config, groups["tp"])
    for i, block in enumerate(model.blocks):
        block.attn = RingParallelAttention(block.attn, groups["cp"])
        if i >= spec.dense_layers:
            block.mlp = ExpertParallelMoE(serial.blocks[i].mlp, groups["ep"])
    positions = torch.tensor(rank_positions(config.seq_len, grid.coord("cp", rank), grid.cp, True))
    split_layers(config.n_layer, grid.pp)  # the rule, before any chunk is built
    chunk = FiveDChunk(model, grid.coord("pp", rank), grid.pp, positions)
    return model, [chunk], positions


def finish_grads(params: dict[str, nn.Parameter], groups: dict, grid: Grid) -> None:
    """Dense gradients averaged over dp x cp; experts' summed over their replicas / (dp x cp)."""
    n = grid.dp * grid.cp
    for name, p in params.items():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        group = groups["edp"] if is_expert_param(name) else groups["dp-cp"]
        if group.world_size > 1:
            p.grad.copy_(group.all_reduce(p.grad.contiguous()))
        p.grad.div_(n)


def check_5d_batch(x: torch.Tensor, y: torch.Tensor, config: GPTConfig, grid: Grid) -> None:
    """A global batch of ``train_5d``: token ids (b, seq_len) that split over dp (CP shards whole
    sequences), as ValueErrors naming the rule."""
    check_tokens(x, config, y)
    if x.shape[0] % grid.dp or x.shape[1] != config.seq_len:
        raise ValueError(f"the global batch {tuple(x.shape)} must split over dp={grid.dp} and "
                         f"have seq_len={config.seq_len} positions (CP shards whole sequences)")


def train_5d(comm, config: GPTConfig, spec: MoESpec, grid: Grid, batches: Iterable[tuple],
             steps: int, schedule=None, lr: float = 0.1) -> list[float]:
    """``steps`` SGD steps of the MoE TinyGPT on a dp x tp x pp x cp x ep grid; ``batches``
    yields global (x, y) of (b, s); ``schedule`` is a loop-placement ``parlab.schedules`` schedule
    for grid.pp stages (default 1F1B with one micro-batch per sequence of a DP block). Returns the
    loss of every step over the global batch, on every rank. The arguments are
    ``agree.check_training``'s (the first ``steps`` batches, the same on every rank) and the
    executor's (``check_run``), checked before any step; a non-finite loss stops the run
    (FloatingPointError naming the step)."""
    from parlab.schedules import Schedule, one_f_one_b

    instance("grid", grid, Grid, "parlab.layout.Grid(dp=, tp=, pp=, cp=, ep=)").check(world=comm.world_size)
    if schedule is not None and (not isinstance(schedule, Schedule) or schedule.p != grid.pp):
        got = f"p={schedule.p}" if isinstance(schedule, Schedule) else type(schedule).__name__
        raise ValueError(f"train_5d: the schedule must be a parlab.schedules schedule for the grid's "
                         f"pp={grid.pp} stages, got {got}")
    taken = check_training(comm, "train_5d", batches, steps, lr)
    for x, y in taken:
        check_5d_batch(x, y, config, grid)
    groups = build_groups(comm, grid)
    for x, y in taken:  # the executor's rules for each step's DP block, before any step
        b = x.shape[0] // grid.dp
        check_run(groups["pp"], schedule or one_f_one_b(grid.pp, b), config, x[:b], y[:b])
    model, chunks, positions = build_model(config, spec, grid, groups, comm.rank)
    params = owned_params(model, chunks)
    holder = grid.coord("pp", comm.rank) == grid.pp - 1 and grid.coord("tp", comm.rank) == 0
    losses = []
    for step, (x, y) in enumerate(taken, start=1):
        b = x.shape[0] // grid.dp
        d = grid.coord("dp", comm.rank)
        xs, ys = (t[d * b:(d + 1) * b][:, positions] for t in (x, y))  # (b/dp, s/cp)
        sched = schedule or one_f_one_b(grid.pp, b)
        for p in params.values():
            p.grad = None
        with diverging("train_5d", step):
            run = run_schedule(groups["pp"], sched, model, chunks, xs, ys)
        sync_tied_grads(groups["pp"], model, grid.pp)
        finish_grads(params, groups, grid)
        with torch.no_grad():
            for p in params.values():
                p -= lr * p.grad
        mine = run.loss / (grid.dp * grid.cp) if holder else 0.0
        loss = float(comm.all_reduce(torch.tensor([mine], dtype=torch.float64))[0])
        losses.append(check_loss("train_5d", step, loss))
    return losses
