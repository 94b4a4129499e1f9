"""ZeRO measured against the cost model: the bytes a rank holds and sends in one step of
``ZeroDataParallel`` beside ``parlab.costmodel``'s terms for the same TinyGPT (chapters 07, 09)."""

from __future__ import annotations

import torch

from .config import DTYPES
from .stages import ZeroDataParallel


def _one_step(comm, stage: int | None, cfg, batch: int, dtype: str = "fp32", offload: str | None = None):
    """Build ZeRO ``stage`` (None: parlab's DistributedDataParallel) on ``comm`` and run one
    step on this rank's block of a ``batch``-sequence global batch after one warm-up step;
    returns (engine, bytes this rank sent in the measured step)."""
    from ..data_parallel.ddp import DistributedDataParallel
    from ..dataset import batches
    from ..model import GPTConfig, TinyGPT

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
    DDP), with the ratio to DDP, beside the cost model's (``parlab.costmodel.pricing.alphabeta.traffic``
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
