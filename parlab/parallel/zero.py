"""ZeRO stages 0-3 over the data-parallel group, from scratch: ``ZeroDataParallel``.

Rajbhandari et al. 2020 ("ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", Section 5, Figure 1) remove the data-parallel replicas of the model states one by one:

    stage 0  plain data parallelism: all-reduce the gradients, every rank updates everything
    stage 1  P_os     optimizer states sharded: reduce-scatter the gradients after backward,
                      each rank updates its 1/Nd shard, all-gather the updated weights
    stage 2  P_os+g   + gradients sharded: each unit's gradients are reduce-scattered to their
                      owners as soon as backward has produced them; only the owned shard is kept
    stage 3  P_os+g+p + parameters sharded: each unit is all-gathered just before its forward
                      and again before its backward, freed after each (Section 5.3), the next
                      unit's all-gather started early (prefetch)

Traffic per rank (Section 7.2): stages 0-2 move 2 Psi (reduce-scatter + all-gather = one
all-reduce), stage 3 3 Psi (two all-gathers + one reduce-scatter): 1.5x.

The parameters are grouped in *units* (PyTorch FSDP's FlatParameter, Zhao et al. 2023, Sec. 3.2):
each ``nn.ModuleList`` entry of the model (TinyGPT's blocks) is a unit and the rest (embeddings,
final norm, tied head) the root unit. A unit's parameters become views of one flat working
buffer, padded to a multiple of Nd (``zero_shard``); rank r owns block r of it. Stage 3 frees a
buffer by resizing its storage to 0 bytes and re-allocates it to gather (FSDP's
``_free_storage``), so tensors autograd saved (views of the buffer) see the gathered values again
in backward; the root unit is held gathered through the whole forward (its embedding runs first,
its head last) and gathered again first in backward. Mixed precision and offload: ``offload.ShardOptimizer``. Memory: ``measure.MemoryLedger``
is sampled wherever what a rank holds changes; ``engine.ledger.peak`` is the step's peak.

    engine = ZeroDataParallel(TinyGPT(cfg), comm, stage=2, dtype="bf16")
    loss = engine(x, y)      # this rank's block of the global batch
    loss.backward()          # stage 2/3: reduce-scatter unit by unit during backward
    engine.step()            # Adam on the owned fp32 shard, then (stages 1-2) all-gather

fp16 here has no loss scaling (chapter 09 shows why real runs need it); bf16 does not.
"""

from __future__ import annotations

import torch
from torch import nn

from .data_parallel import _Done, broadcast_state, check_same_shapes, supports_async
from .measure import MemoryLedger
from .offload import ShardOptimizer
from .zero_shard import shard_plan

STAGES = (0, 1, 2, 3)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
OFFLOADS = (None, "optimizer", "optimizer+params")


def check_zero_args(stage: object, dtype: object, offload: object) -> None:
    """The rules of a ZeRO configuration, each a ValueError naming the rule and the value."""
    if isinstance(stage, bool) or stage not in STAGES:
        raise ValueError(f"ZeRO stage must be one of 0, 1, 2, 3, got {stage!r}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (the working weights' precision), "
                         f"got {dtype!r}")
    if offload not in OFFLOADS:
        raise ValueError(f"offload must be None, 'optimizer' or 'optimizer+params', got {offload!r}")
    if offload == "optimizer" and stage < 1:
        raise ValueError(f"offload='optimizer' needs ZeRO stage >= 1 (only a sharded optimizer state "
                         f"is offloaded, as in ZeRO-Offload), got stage={stage}")
    if offload == "optimizer+params" and stage != 3:
        raise ValueError(f"offload='optimizer+params' needs ZeRO stage 3 (only sharded parameters can "
                         f"live on the host), got stage={stage}")


class _Unit:
    """One flat group of parameters gathered, reduced and updated together."""

    def __init__(self, module: nn.Module, params: list[nn.Parameter], world: int, rank: int,
                 dtype: torch.dtype):
        self.module = module
        self.shapes = [p.shape for p in params]
        self.plan = shard_plan(sum(p.numel() for p in params), world)
        self.lo = self.plan.start(rank)
        self.buffer = torch.zeros(self.plan.padded, dtype=dtype)  # (padded,) the working weights
        self.nbytes = self.buffer.untyped_storage().nbytes()
        offset = 0
        with torch.no_grad():
            for p in params:
                self.buffer[offset:offset + p.numel()] = p.detach().reshape(-1)
                offset += p.numel()
        self.params = [nn.Parameter(v.view(s)) for v, s in zip(self._views(self.buffer), self.shapes,
                                                                strict=True)]
        self.grad_bucket: torch.Tensor | None = None  # (padded,) stage 0-1: always; 2-3: in backward
        self.grad_shard: torch.Tensor | None = None   # (shard,) the owned, averaged gradient
        self.pending = 0       # gradients this backward still waits for
        self.gathering = None  # the handle of a prefetched all-gather
        self.gathered = True

    def _views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        out, offset = [], 0
        for s in self.shapes:
            n = s.numel()
            out.append(flat[offset:offset + n])
            offset += n
        return out

    def attach_grads(self, bucket: torch.Tensor) -> None:
        """Autograd accumulates into views of ``bucket`` (DDP's gradient_as_bucket_view)."""
        self.grad_bucket = bucket
        for p, v in zip(self.params, self._views(bucket), strict=True):
            p.grad = v.view(p.shape)


def _replace_params(module: nn.Module, old: list[nn.Parameter], new: list[nn.Parameter]) -> None:
    """Point every attribute holding an ``old`` parameter (tied weights: several) at its ``new`` one."""
    swap = {id(o): n for o, n in zip(old, new, strict=True)}
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is not None and id(p) in swap:
                m._parameters[name] = swap[id(p)]


def _units(module: nn.Module) -> list[tuple[nn.Module, list[nn.Parameter]]]:
    """(module, its distinct parameters): the root first (parameters outside any unit), then
    every entry of the model's ``nn.ModuleList`` children (TinyGPT's blocks), in forward order."""
    inner = [m for child in module.children() if isinstance(child, nn.ModuleList) for m in child]
    taken = {id(p) for m in inner for p in m.parameters()}
    root = [p for p in module.parameters() if id(p) not in taken and p.requires_grad]
    return [(module, root)] + [(m, [p for p in m.parameters() if p.requires_grad]) for m in inner]


class ZeroDataParallel(nn.Module):
    """``module`` trained with ZeRO ``stage`` (0-3) over the data-parallel ranks of ``comm``.

    ``dtype``: the working weights and gradients ('fp32', or 'bf16' / 'fp16' with fp32 master
    weights and Adam moments in the shard). ``lr``, ``betas``, ``eps``, ``weight_decay``: AdamW,
    the defaults of ``parlab.parallel.make_optimizer``. ``offload``: None, 'optimizer' (stage >=
    1: master and moments on the host) or 'optimizer+params' (stage 3: the weight shard too).
    ``prefetch`` (stage 3): start the next unit's all-gather before the current one computes.
    """

    def __init__(self, module: nn.Module, comm, stage: int = 1, *, dtype: str = "fp32",
                 lr: float = 3e-3, betas: tuple[float, float] = (0.9, 0.95), eps: float = 1e-8,
                 weight_decay: float = 0.0, offload: str | None = None, prefetch: bool = True):
        super().__init__()
        check_zero_args(stage, dtype, offload)
        if not isinstance(module, nn.Module):
            raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr!r}")
        self.module, self.comm, self.stage, self.dtype = module, comm, stage, dtype
        self.offload, self.prefetch = offload, prefetch
        self.world = comm.world_size
        check_same_shapes(module, comm)
        broadcast_state(module, comm)  # replicas start equal (rank 0's weights), in fp32
        owners = self.world if stage >= 1 else 1  # stage 0: every rank owns everything
        rank = comm.rank if owners > 1 else 0
        self.units: list[_Unit] = []
        for m, params in _units(module):
            if not params:
                continue
            unit = _Unit(m, params, owners, rank, DTYPES[dtype])
            _replace_params(module, params, unit.params)
            shard = unit.buffer[unit.lo:unit.lo + unit.plan.shard]  # (shard,) a view
            if stage == 3:
                shard = shard.clone()
                unit.buffer.untyped_storage().resize_(0)  # freed until gathered
                unit.gathered = False
            unit.opt = ShardOptimizer(shard, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      offload=offload is not None, params=offload == "optimizer+params")
            if stage <= 1:  # the full gradient is kept: autograd writes into one flat buffer
                unit.attach_grads(torch.zeros(unit.plan.padded, dtype=DTYPES[dtype]))
            self.units.append(unit)
        self._hooks = []
        for i, unit in enumerate(self.units):
            self._hooks += [p.register_post_accumulate_grad_hook(self._grad_ready(unit)) for p in unit.params]
            if stage == 3:
                self._hooks.append(unit.module.register_forward_pre_hook(self._forward_pre(i)))
            if stage >= 2:
                self._hooks.append(unit.module.register_forward_hook(self._forward_post(i)))
        self._in_backward = False
        self._reduced = False  # the gradients of a backward reduced, not yet applied by step()
        self.ledger = MemoryLedger(self._walk)
        self.after_backward: dict[str, int] = {}  # what was held once the gradients were reduced
        self.ledger.sample("init")

    def forward(self, *args, **kwargs):
        self.ledger.sample("forward start")
        out = self.module(*args, **kwargs)
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

    # ---------------------------------------------------------------- stage 3: gather and free
    def _start_gather(self, unit: _Unit, asynchronous: bool) -> None:
        if unit.gathered:
            return
        unit.buffer.untyped_storage().resize_(unit.nbytes)  # the full unit is held from here on
        src = unit.opt.fetch()  # (shard,)
        if self.world == 1:
            unit.gathering = _Done(src)
        elif asynchronous and supports_async(self.comm):
            unit.gathering = self.comm.all_gather(src, async_op=True)
        else:
            unit.gathering = _Done(self.comm.all_gather(src))
        unit.gathered = True

    def _ensure_gathered(self, unit: _Unit) -> None:
        self._start_gather(unit, asynchronous=False)
        if unit.gathering is not None:
            # into the buffer by copy (a collective's ``out`` may pin the storage: numpy's view
            # of it makes it unresizable); .data: autograd sees no in-place write of a parameter
            unit.buffer.data.copy_(unit.gathering.wait())  # (padded,)
            unit.gathering = None

    def _free(self, unit: _Unit) -> None:
        self._ensure_gathered(unit)  # never free under an all-gather still writing
        unit.buffer.untyped_storage().resize_(0)
        unit.gathered = False

    def _forward_pre(self, i: int):
        def hook(module, args):
            self._ensure_gathered(self.units[i])
            if self.prefetch and i + 1 < len(self.units):
                self._start_gather(self.units[i + 1], asynchronous=True)
            self.ledger.sample(("forward", i))
        return hook

    def _forward_post(self, i: int):
        """After the unit's forward: a hook on its output's gradient (the moment its backward
        begins, as FSDP2 hooks its outputs), and stage 3 frees the unit. The root unit (the
        whole model's forward) is freed only at the end of forward, as its embedding and head
        run first and last; backward gathers it again first, so every unit is gathered twice."""
        def hook(module, args, output):
            if isinstance(output, torch.Tensor) and output.requires_grad:
                output.register_hook(lambda grad: self._backward_pre(i))
            if self.stage == 3:
                self._free(self.units[i])
        return hook

    # ---------------------------------------------------------------- backward
    def _begin_backward(self) -> None:
        if self._in_backward:
            return
        if self.stage <= 1 and self._reduced:
            raise RuntimeError(f"ZeRO stage {self.stage} reduces the full gradient at the end of each "
                               f"backward: call step() after every backward (gradient accumulation "
                               f"over micro-batches needs stage 2 or 3, which add to the owned shard)")
        self._in_backward = True
        for u in self.units:
            u.pending = len(u.params)
        torch.autograd.Variable._execution_engine.queue_callback(self._finish_backward)

    def _backward_pre(self, i: int) -> None:
        """Before unit ``i``'s backward: stage 3 gathers it again (and prefetches the unit
        backward reaches next); its gradient bucket is allocated."""
        self._begin_backward()
        unit = self.units[i]
        if self.stage == 3:
            self._ensure_gathered(unit)
            after = len(self.units) - 1 if i == 0 else i - 1  # the unit backward reaches next
            if self.prefetch and after >= 1:
                self._start_gather(self.units[after], asynchronous=True)
        if unit.grad_bucket is None:
            unit.attach_grads(torch.zeros(unit.plan.padded, dtype=DTYPES[self.dtype]))
        self.ledger.sample(("backward", i))

    def _grad_ready(self, unit: _Unit):
        def hook(param: torch.Tensor) -> None:
            self._begin_backward()
            unit.pending -= 1
            if unit.pending == 0 and self.stage >= 2:
                self._reduce_scatter(unit)
        return hook

    @torch.no_grad()
    def _reduce_scatter(self, unit: _Unit) -> None:
        """Stage 2-3: the unit's summed gradient shard to its owner; the full gradient freed."""
        if unit.grad_bucket is None:  # no gradient reached this unit: it contributes zeros
            unit.attach_grads(torch.zeros(unit.plan.padded, dtype=DTYPES[self.dtype]))
        self.ledger.sample(("reduce", self.units.index(unit)))
        bucket = unit.grad_bucket
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
        """When backward ends: stage 0 all-reduces, stage 1 reduce-scatters the kept full
        gradients; stages 2-3 reduce what no hook has (unused parameters)."""
        for u in self.units:
            if self.stage == 0:
                if self.world > 1:
                    self.comm.all_reduce(u.grad_bucket, inplace=True)
            elif self.stage == 1:
                owned = u.grad_bucket[u.lo:u.lo + u.plan.shard]  # (shard,) the owner's slice
                if self.world > 1:
                    owned.copy_(self.comm.reduce_scatter(u.grad_bucket))
                u.grad_shard = owned
            elif u.pending > 0:
                self._reduce_scatter(u)
        self._in_backward = False
        self._reduced = True
        self.after_backward = self.ledger.sample("backward end")

    # ---------------------------------------------------------------- the update
    @torch.no_grad()
    def step(self) -> None:
        """AdamW on each owned shard from the averaged gradient; stages 1-2 then all-gather the
        updated weights (stage 0 updated them all; stage 3 gathers them when next used)."""
        for u in self.units:
            grad = u.grad_bucket if self.stage == 0 else u.grad_shard
            if grad is None:
                raise RuntimeError("step() before backward(): no gradient to apply")
            u.opt.step(grad, divide_by=self.world)
        self.ledger.sample("updated")
        for u in self.units:
            if self.stage in (1, 2) and self.world > 1:
                self.comm.all_gather(u.opt.working.clone(), out=u.buffer.data)
            if self.stage <= 1:
                u.grad_bucket.zero_()
            u.grad_shard = None
        self._reduced = False
        self.ledger.sample("step end")

    @torch.no_grad()
    def full_parameters(self) -> list[torch.Tensor]:
        """The fp32 master weights of the whole model, in ``module.parameters()`` order
        (collective: every rank of the group must call it)."""
        full = {}
        for u in self.units:
            master = u.opt.master
            flat = self.comm.all_gather(master.contiguous()) if self.stage >= 1 and self.world > 1 else master
            for p, v in zip(u.params, u._views(flat), strict=True):
                full[id(p)] = v.view(p.shape).clone()
        return [full[id(p)] for p in self.module.parameters()]

    def remove_hooks(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []


# ---------------------------------------------------------------------------- measured vs modelled
def _one_step(comm, stage: int | None, cfg, batch: int, dtype: str = "fp32", offload: str | None = None):
    """Build ZeRO ``stage`` (None: parlab's DistributedDataParallel) on ``comm`` and run one
    step on this rank's block of a ``batch``-sequence global batch after one warm-up step;
    returns (engine, bytes this rank sent in the measured step)."""
    from .data import batches
    from .data_parallel import DistributedDataParallel
    from .model import GPTConfig, TinyGPT

    cfg = GPTConfig() if cfg is None else cfg
    n = comm.world_size
    if batch % n:
        raise ValueError(f"batch={batch} must be divisible by the data-parallel ranks ({n}): each "
                         f"rank takes an equal block of the global batch")
    data = batches(batch, cfg.seq_len, seed=1, rank=comm.rank, world=n)
    if stage is None:
        engine = DistributedDataParallel(TinyGPT(cfg), comm)
    else:
        engine = ZeroDataParallel(TinyGPT(cfg), comm, stage, dtype=dtype, offload=offload)
    for _ in range(2):
        x, y = next(data)
        comm.reset_traffic()
        if stage is not None:
            engine.ledger.reset_peak()
        engine(x, y).backward()
        if stage is None:
            with torch.no_grad():
                for p in engine.parameters():
                    p -= 0.01 * p.grad
                    p.grad = None
        else:
            engine.step()
    sent = sum(t.bytes_sent for t in comm.traffic().values())
    return engine, sent


def zero_memory_rows(comm, stage: int, cfg=None, *, dtype: str = "fp32", batch: int = 8,
                     offload: str | None = None) -> list[dict]:
    """Bytes this rank held in one step of ZeRO ``stage`` beside the cost model's terms for the
    same TinyGPT (``parlab.costmodel.zero_model_states``, ``zero3_gathered_params``): rows
    ``{"term", "measured", "modelled"}``. Measured: the working weights kept, the gradients
    kept once backward has reduced them, the optimizer states on the device (and on the host
    with offload), the gathered units' peak (stage 3), and the step's peak of their sum, which
    also holds what the model leaves out (a unit's full gradient bucket before its
    reduce-scatter, stages 2-3). A run on every rank of ``comm`` (call it inside ``world.run``)."""
    from parlab.costmodel import zero3_gathered_params, zero_model_states

    engine, _ = _one_step(comm, stage, cfg, batch, dtype, offload)
    cfg = engine.module.config
    psi = sum(p.numel() for p in engine.module.parameters())
    model = zero_model_states(psi, comm.world_size, stage, "fp32" if dtype == "fp32" else "mixed", "adam")
    optim = model.master + model.optimizer_states
    gathered = zero3_gathered_params(cfg.model_spec()) * DTYPES[dtype].itemsize if stage == 3 else 0.0
    peak, kept = engine.ledger.peak, engine.after_backward
    rows = [{"term": "weights", "measured": peak.get("parameters", 0), "modelled": model.weights},
            {"term": "gradients", "measured": kept.get("gradients", 0), "modelled": model.grads},
            {"term": "optimizer states", "measured": peak.get("optimizer states", 0),
             "modelled": 0.0 if offload else optim}]
    if offload:
        rows.append({"term": "host (offloaded)", "measured": peak.get("host", 0),
                     "modelled": optim + (model.weights if offload == "optimizer+params" else 0.0)})
        rows[0]["modelled"] = 0.0 if offload == "optimizer+params" else model.weights
    if stage == 3:
        rows.append({"term": "gathered units", "measured": peak.get("gathered", 0), "modelled": gathered})
    device = sum(r["modelled"] for r in rows if r["term"] != "host (offloaded)")
    rows.append({"term": "peak during the step", "measured": engine.ledger.peak_total, "modelled": device})
    engine.remove_hooks()
    return rows


def zero_traffic_rows(comm, cfg=None, *, batch: int = 8, dtype: str = "fp32") -> list[dict]:
    """Bytes this rank sent in one step of DDP and of ZeRO stages 1-3 (fp32 gradients for
    DDP), with the ratio to DDP, beside the cost model's (``parlab.costmodel.alphabeta.traffic``
    of the ring collectives over Psi parameters; ``zero3_traffic_per_step`` for stage 3): rows
    ``{"strategy", "bytes_sent", "ratio", "modelled", "modelled_ratio"}``. Measured on the local
    backend it is the bytes really sent (stages 1-2 move a little more than DDP: each unit is
    padded to a multiple of the ranks); the torch backend's counts are nominal."""
    from parlab.costmodel import alphabeta, zero3_traffic_per_step

    n = comm.world_size
    ddp, base = _one_step(comm, None, cfg, batch)
    psi = sum(p.numel() for p in ddp.module.parameters())
    ddp.remove_hooks()
    width = DTYPES[dtype].itemsize
    ring = 2 * alphabeta.traffic("all_gather", "ring", n, psi * width)[0]  # reduce-scatter + all-gather
    modelled = {"DDP": alphabeta.traffic("all_reduce", "ring", n, psi * 4)[0], "ZeRO-1": ring,
                "ZeRO-2": ring, "ZeRO-3": zero3_traffic_per_step(psi, n, dtype)}
    rows = [{"strategy": "DDP", "bytes_sent": base}]
    for stage in (1, 2, 3):
        engine, sent = _one_step(comm, stage, cfg, batch, dtype)
        engine.remove_hooks()
        rows.append({"strategy": f"ZeRO-{stage}", "bytes_sent": sent})
    for r in rows:
        r["ratio"] = r["bytes_sent"] / base if base else float("nan")
        r["modelled"] = modelled[r["strategy"]]
        r["modelled_ratio"] = r["modelled"] / modelled["DDP"] if n > 1 else float("nan")
    return rows
