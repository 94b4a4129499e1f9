"""ZeRO stages 0-3 over the data-parallel group, from scratch: ``ZeroDataParallel``.

Rajbhandari et al. 2020 ("ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", Section 5, Figure 1) remove the data-parallel replicas of the model states one by one:

    stage 0  plain data parallelism: all-reduce the gradients, every rank updates everything
    stage 1  P_os     optimizer states sharded: reduce-scatter the gradients (a bucket of
                      units as soon as backward has produced it, overlapping the rest of
                      backward), each rank updates its 1/Nd shard, all-gather the updated
                      weights (``buckets``)
    stage 2  P_os+g   + gradients sharded: each unit's gradients are reduce-scattered to their
                      owners as soon as backward has produced them; only the owned shard is kept
    stage 3  P_os+g+p + parameters sharded: each unit is all-gathered just before its forward
                      and again before its backward, freed after each (Section 5.3), the next
                      unit's all-gather started early (prefetch)

Traffic per rank (Section 7.2): stages 0-2 move 2 Psi (reduce-scatter + all-gather = one
all-reduce), stage 3 3 Psi (two all-gathers + one reduce-scatter): 1.5x.

The parameters are grouped in *units* (``unit``: TinyGPT's blocks, and the root). Every
rank issues its collectives unit by unit in one fixed order, whatever its own backward reaches
first: stages 2-3 reduce-scatter in reverse unit order (a unit whose gradients are ready waits
for the ones before it, as DDP's buckets do), stage 3 gathers in forward order and, in backward,
the root then the blocks last to first (``hooks``); a unit a rank skips is gathered (and
reduced, as zeros) in its turn all the same. So a block unused on some ranks only pairs with
itself, never with a neighbour of the same size; where the ranks still disagree (stage 3: a
backward that reaches the units in another order), the collective's ``CollectiveMismatch`` is
raised again naming the unit and its parameters. Stage 3 frees a buffer by resizing its storage
to 0 bytes and re-allocates it to gather (FSDP's ``_free_storage``), so tensors autograd saved
(views of the buffer) see the gathered values again in backward; the root unit is held gathered
through the whole forward (its embedding runs first, its head last) and gathered again first in
backward. Mixed precision and offload: ``offload.ShardOptimizer``. Memory: ``parallel.measure.MemoryLedger``
is sampled wherever what a rank holds changes; ``engine.ledger.peak`` is the step's peak.

    engine = ZeroDataParallel(TinyGPT(cfg), comm, stage=2, dtype="bf16")
    loss = engine(x, y)      # this rank's block of the global batch
    loss.backward()          # stage 2/3: reduce-scatter unit by unit during backward
    engine.step()            # Adam on the owned fp32 shard, then (stages 1-2) all-gather

fp16 runs with dynamic loss scaling (``precision.DynamicLossScaler``, Micikevicius et al. 2018,
Sec. 3.2): backward starts from the loss times the scale; ``step()`` checks every rank's gradient
shard for inf/nan (one 1-element all-reduce), and if any holds one no rank updates, the scale is
backed off and ``skipped_steps`` counts it; otherwise the gradients are divided by the scale.
"""

from __future__ import annotations

import torch
from torch import nn

from ..agree import agree
from ..data_parallel.bucket import cap_bytes
from ..data_parallel.ddp import broadcast_state, check_same_shapes
from ..measure import MemoryLedger
from ..precision import DynamicLossScaler, cast_floating
from .buckets import BucketCollectives, bucket_units, share_storage
from .config import DTYPES, FP16_INIT_SCALE, OFFLOADS, check_zero_args
from .hooks import UnitHooks, _ScaleGrad
from .offload import ShardOptimizer, check_adamw
from .unit import Unit, find_units, replace_params
from .update import ShardUpdate


class ZeroDataParallel(BucketCollectives, UnitHooks, ShardUpdate, nn.Module):
    """``module`` trained with ZeRO ``stage`` (0-3) over the data-parallel ranks of ``comm``.

    ``dtype``: the working weights and gradients ('fp32', or 'bf16' / 'fp16' with fp32 master
    weights and Adam moments in the shard; floating-point inputs are cast to it, token ids are
    not: ``precision.cast_floating``). ``lr``, ``betas``, ``eps``, ``weight_decay``: AdamW,
    the defaults of ``parlab.parallel.make_optimizer``. ``offload``: None, 'optimizer' (stage >=
    1: master and moments on the host) or 'optimizer+params' (stage 3: the weight shard too).
    ``prefetch`` (stage 3): start the next unit's all-gather before the current one computes.
    ``scaler``: a ``DynamicLossScaler`` (fp16's default: one starting at 2^15; none for fp32 and
    bf16 unless given). ``bucket_cap_mb`` (MiB, > 0; DDP's default 25): stages 0-1 reduce and
    stages 1-2 all-gather the units a bucket of about this size at a time (``buckets``).
    Frozen parameters (``requires_grad=False``) are kept as they are. Built collectively: every
    rank must pass the same model shapes and the same settings (``CollectiveMismatch`` otherwise).
    """

    def __init__(self, module: nn.Module, comm, stage: int = 1, *, dtype: str = "fp32",
                 lr: float = 3e-3, betas: tuple[float, float] = (0.9, 0.95), eps: float = 1e-8,
                 weight_decay: float = 0.0, offload: str | None = None, prefetch: bool = True,
                 scaler: DynamicLossScaler | None = None, bucket_cap_mb: float = 25.0):
        super().__init__()
        check_zero_args(stage, dtype, offload)
        check_adamw(lr, betas, eps, weight_decay)
        cap = cap_bytes(bucket_cap_mb)
        if not isinstance(module, nn.Module):
            raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        if scaler is not None and not isinstance(scaler, DynamicLossScaler):
            raise TypeError(f"scaler must be a parlab.parallel.DynamicLossScaler or None, got "
                            f"{type(scaler).__name__}")
        if scaler is None and dtype == "fp16":
            scaler = DynamicLossScaler(init_scale=FP16_INIT_SCALE)
        self.module, self.comm, self.stage, self.dtype = module, comm, stage, dtype
        self.offload, self.prefetch, self.scaler = offload, prefetch, scaler
        self.skipped_steps = 0  # steps not taken: a gradient held an inf or nan (with a scaler)
        self.world = comm.world_size
        check_same_shapes(module, comm, "ZeroDataParallel")
        agree(comm, "ZeroDataParallel", {  # a shard updated with another rank's lr: silently wrong
            "stage": stage, "dtype": DTYPES[dtype], "lr": float(lr), "beta1": float(betas[0]),
            "beta2": float(betas[1]), "eps": float(eps), "weight_decay": float(weight_decay),
            "offload (0 None, 1 'optimizer', 2 'optimizer+params')": OFFLOADS.index(offload),
            "bucket bytes": cap})
        broadcast_state(module, comm)  # replicas start equal (rank 0's weights), in fp32
        owners = self.world if stage >= 1 else 1  # stage 0: every rank owns everything
        rank = comm.rank if owners > 1 else 0
        self.units: list[Unit] = []
        for m, name, params, names in find_units(module):
            if not params:
                continue
            unit = Unit(m, name, params, names, owners, rank, DTYPES[dtype])
            replace_params(module, params, unit.params)
            shard = unit.owned(unit.buffer)  # (shard,) a view
            if stage == 3:
                shard = shard.clone()
                unit.buffer.untyped_storage().resize_(0)  # freed until gathered
                unit.gathered = False
            unit.opt = ShardOptimizer(shard, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      offload=offload is not None, params=offload == "optimizer+params")
            if stage == 1:  # the full gradient is kept in one flat buffer (stage 0: one per bucket)
                unit.new_bucket()
            self.units.append(unit)
        # the one order of the collectives on every rank: reduce blocks last to first, then the
        # root; stage 3 gathers in forward order, and in backward the root then blocks last to first
        root = bool(self.units) and self.units[0].module is module
        blocks = list(range(int(root), len(self.units)))
        self._reduce_order = blocks[::-1] + [0] * root
        self._gather_order = [0] * root + blocks[::-1]
        self._buckets = bucket_units(self.units, cap)  # the reduce order, in buckets
        # stages 2-3 reduce-scatter unit by unit: each unit's full gradient is freed at once
        self._reduce_buckets = self._buckets if stage <= 1 else [[j] for j in self._reduce_order]
        self._flats = ([share_storage([self.units[j] for j in b]) for b in self._buckets]
                       if stage == 0 else [])  # stage 0: a bucket's gradients in one flat buffer
        self._reducing = []  # stages 0-1: the buckets' reductions in flight (``buckets.Reduction``)
        self._hooks = []
        if stage == 3:  # registered first: runs before the units' own hooks on the root
            self._hooks += [module.register_forward_pre_hook(self._forward_begin),
                            module.register_forward_hook(self._forward_end)]
        for i, unit in enumerate(self.units):
            self._hooks += [p.register_post_accumulate_grad_hook(self._grad_ready(unit)) for p in unit.params]
            if stage == 3:
                self._hooks.append(unit.module.register_forward_pre_hook(self._forward_pre(i)))
            if stage >= 2:
                self._hooks.append(unit.module.register_forward_hook(self._forward_post(i)))
        self._in_backward = False
        self._reduced = False  # the gradients of a backward reduced, not yet applied by step()
        self._next_reduce = 0  # position in _reduce_buckets of the next bucket to reduce
        self.ledger = MemoryLedger(self._walk)
        self.after_backward: dict[str, int] = {}  # what was held once the gradients were reduced
        self.ledger.sample("init")

    @property
    def buckets(self) -> list[list[str]]:
        """The units' names ('' for the root) in each bucket, in the order they are reduced."""
        return [[self.units[j].name for j in bucket] for bucket in self._buckets]

    def forward(self, *args, **kwargs):
        self.ledger.sample("forward start")
        if self.dtype != "fp32":  # float inputs meet 16-bit weights: cast them (DeepSpeed, autocast)
            args, kwargs = cast_floating((args, kwargs), DTYPES[self.dtype])
        out = self.module(*args, **kwargs)
        if self.scaler is not None and isinstance(out, torch.Tensor) and out.requires_grad:
            out = _ScaleGrad.apply(out, self.scaler.scale_value)  # backward starts at the scale
        self.ledger.sample("forward end")
        return out

    # ---------------------------------------------------------------- what is held
    def _walk(self) -> dict[str, list]:
        params, gathered, grads, states, host = [], [], [], [], []
        for u in self.units:
            (gathered if self.stage == 3 else params).append(u.buffer)
            if self.stage == 3 and not u.opt.params_on_host:
                params.append(u.opt.working)
            grads += [u.grad_bucket, u.grad_shard] + [p.grad for p in u.params]
            states += u.opt.device_tensors()
            host += u.opt.host_tensors()
        grads += [r.fused for r in self._reducing]  # a bucket's copy while it is reduced
        return {"parameters": params, "gathered": gathered, "gradients": grads,
                "optimizer states": states, "host": host}

    def held(self) -> dict[str, int]:
        """Bytes held now by category (see ``measure.held_bytes``); 'host' is offloaded state."""
        return self.ledger.now()

    @property
    def host_traffic(self) -> dict[str, int]:
        """Bytes the offload path copied device -> host and host -> device so far."""
        out = {"device_to_host": 0, "host_to_device": 0}
        for u in self.units:
            for k, v in u.opt.traffic.items():
                out[k] += v
        return out

    # ---------------------------------------------------------------- backward
    def _begin_backward(self) -> None:
        if self._in_backward:
            return
        if self.stage <= 1 and self._reduced:
            raise RuntimeError(f"ZeRO stage {self.stage} reduces the full gradient at the end of each "
                               f"backward: call step() after every backward (gradient accumulation "
                               f"over micro-batches needs stage 2 or 3, which add to the owned shard)")
        self._in_backward = True
        self._next_reduce = 0
        for u in self.units:
            u.pending = len(u.params)
            u.seen = False
        torch.autograd.Variable._execution_engine.queue_callback(self._finish_backward)

    def _grad_ready(self, unit: Unit):
        def hook(param: torch.Tensor) -> None:
            self._begin_backward()
            unit.pending -= 1
            if unit.pending == 0:
                self._reduce_ready()
        return hook

    def _reduce_ready(self, everything: bool = False) -> None:
        """Reduce the buckets whose gradients are complete, in the one order (a later bucket
        waits for an earlier one): stages 2-3 unit by unit, stages 0-1 a bucket of units at a
        time (``buckets``); ``everything``: the rest too (the end of backward)."""
        order = self._reduce_buckets
        while self._next_reduce < len(order):
            units = [self.units[j] for j in order[self._next_reduce]]
            if not everything and any(u.pending != 0 for u in units):
                return
            if self.stage >= 2:
                self._reduce_scatter(units[0])
            else:  # stages 0-1 keep the full gradient: its reduction starts now, ends after backward
                self._start_reduce(self._next_reduce)
            self._next_reduce += 1

    @torch.no_grad()
    def _reduce_scatter(self, unit: Unit) -> None:
        """Stage 2-3: the unit's summed gradient shard to its owner; the full gradient freed."""
        if unit.grad_bucket is None:  # no gradient reached this unit: it contributes zeros
            unit.new_bucket()
        self.ledger.sample(("reduce", self.units.index(unit)))
        bucket = unit.grad_bucket
        with self._named(unit, "reducing the gradients of"):
            shard = self.comm.reduce_scatter(bucket) if self.world > 1 else bucket.clone()  # (shard,)
        unit.grad_shard = shard if unit.grad_shard is None else unit.grad_shard.add_(shard)
        for p in unit.params:
            p.grad = None
        unit.grad_bucket = None
        unit.pending = -1  # done for this backward
        if self.stage == 3:
            self._free(unit)

    @torch.no_grad()
    def _finish_backward(self) -> None:
        """When backward ends: every stage reduces what no hook has (unused parameters), in the
        one order; stages 0-1 then wait for their reductions (started as each unit's gradient
        was complete: stage 0 all-reduces, stage 1 reduce-scatters the kept full gradient)."""
        if self.stage == 3:
            for j in self._gather_order:  # units this rank's backward never reached
                if not self.units[j].seen:
                    self._visit(self.units[j])
        self._reduce_ready(everything=True)  # the units no hook has reduced, in the one order
        if self.stage <= 1:
            self._wait_reductions()
        self._in_backward = False
        self._reduced = True
        self.after_backward = self.ledger.sample("backward end")

    def remove_hooks(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []
