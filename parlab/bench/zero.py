"""``parlab bench zero``: one training step of ZeRO stages 0-3 (``parlab.parallel.zero``) on
``--ranks`` processes against parlab's DDP, and against torch's own sharding on gloo (stage 1 vs
``torch.distributed.optim.ZeroRedundancyOptimizer`` over torch DDP, stage 3 vs FSDP2
``fully_shard``), as ratios from one run, with the bytes each rank held at the step's peak and
the bytes it sent (local backend: really sent; the torch backend's are nominal).

Every time is the best of ``--repeats`` steps after one warm-up, between two barriers; the
slowest rank sets the pace. Against torch (same gloo world, same TinyGPT, batch and fp32
AdamW) the sides alternate for ``--rounds`` rounds and each keeps its best, and parlab's
communicator runs without its cross-rank signature check (``check``: one extra all-gather
before every native collective, a safety net torch's collectives do not have), so both do the
same sharding work. On CPU processes the times say what the bookkeeping costs (hooks,
extra collectives, the update on a shard), not what a GPU cluster would see: the memory and
traffic columns are the ones the ZeRO paper is about (chapter 07).
"""

from __future__ import annotations

import argparse

from .ddp import _timed  # best of `repeats` steps after a warm-up, between barriers

HELP = "ZeRO stages 0-3 vs DDP (local) and vs torch ZeroRedundancyOptimizer / FSDP2 (gloo)"
STAGES = (0, 1, 2, 3)
TARGET = 1.0  # torch ZeroRedundancyOptimizer's step / parlab ZeRO-1's: parlab at least as fast


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ranks", type=int, default=4, help="data-parallel ranks (default 4)")
    parser.add_argument("--layers", type=int, default=4, help="TinyGPT layers (default 4)")
    parser.add_argument("--hidden", type=int, default=128, help="TinyGPT hidden size (default 128)")
    parser.add_argument("--batch", type=int, default=4, help="sequences per rank per step (default 4)")
    parser.add_argument("--dtype", default="bf16", choices=("fp32", "bf16", "fp16"),
                        help="ZeRO's working weights and gradients (default bf16; DDP and torch: fp32)")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps after a warm-up (default 3)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating parlab / torch rounds against torch (default 3)")
    parser.add_argument("--skip-torch", action="store_true", help="only the local backend (no gloo)")


def _data(comm, batch: int):
    from parlab.parallel import batches

    return next(batches(batch * comm.world_size, 32, rank=comm.rank, world=comm.world_size))


def parlab_worker(comm, layers: int, hidden: int, batch: int, dtype: str, repeats: int,
                  stages: tuple[int, ...]) -> dict:
    """On every rank: {name: (best step seconds, bytes held at the peak, bytes sent per step)}
    for parlab DDP (fp32 AdamW, ``ParamAdamW``: weights + gradients + moments) and each ZeRO stage."""
    from parlab.parallel.data_parallel import DistributedDataParallel
    from parlab.parallel.measure import held_bytes
    from parlab.parallel.model import GPTConfig, TinyGPT
    from parlab.parallel.zero import ParamAdamW, ZeroDataParallel

    cfg = GPTConfig(n_layer=layers, hidden=hidden)
    x, y = _data(comm, batch)
    out = {}
    ddp = DistributedDataParallel(TinyGPT(cfg), comm)
    opt = ParamAdamW(ddp.parameters())

    def ddp_step():
        ddp(x, y).backward()
        opt.step()

    seconds = _timed(comm, ddp_step, repeats)
    comm.reset_traffic()
    ddp(x, y).backward()
    sent = sum(t.bytes_sent for t in comm.traffic().values())
    states = opt.state_tensors()
    held = sum(held_bytes({"p": list(ddp.parameters()), "g": [p.grad for p in ddp.parameters()],
                           "adam": states}).values())
    out["DDP"] = (seconds, held, sent)
    for stage in stages:
        engine = ZeroDataParallel(TinyGPT(cfg), comm, stage, dtype=dtype)

        def step(engine=engine):
            engine(x, y).backward()
            engine.step()

        seconds = _timed(comm, step, repeats)
        comm.reset_traffic()
        engine.ledger.reset_peak()
        step()
        sent = sum(t.bytes_sent for t in comm.traffic().values())
        out[f"ZeRO-{stage}"] = (seconds, engine.ledger.peak_total, sent)
        engine.remove_hooks()
    return out


def torch_worker(comm, layers: int, hidden: int, batch: int, dtype: str, repeats: int,
                 rounds: int = 1) -> dict:
    """On every rank of a torch-backend world: best step seconds of parlab ZeRO-1 / ZeRO-3 and
    of torch DDP + ZeroRedundancyOptimizer / FSDP2 (AdamW, fp32), on gloo, in ``rounds``
    alternating rounds (each keeps its best)."""
    import torch
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.optim import ZeroRedundancyOptimizer

    from parlab.parallel.model import GPTConfig, TinyGPT
    from parlab.parallel.zero import ZeroDataParallel

    cfg = GPTConfig(n_layer=layers, hidden=hidden)
    x, y = _data(comm, batch)

    def stepper(model, opt):
        def step():
            model(x, y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    ddp = torch.nn.parallel.DistributedDataParallel(TinyGPT(cfg))
    zro = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW, lr=3e-3)
    fsdp = TinyGPT(cfg)
    for block in fsdp.blocks:
        fully_shard(block)
    fully_shard(fsdp)
    engines = {stage: ZeroDataParallel(TinyGPT(cfg), comm, stage, dtype="fp32") for stage in (1, 3)}
    steps = {"ZeRO-1": stepper(engines[1], _NoZero(engines[1])),
             "torch ZeroRedundancyOptimizer": stepper(ddp, zro),
             "ZeRO-3": stepper(engines[3], _NoZero(engines[3])),
             "torch FSDP2": stepper(fsdp, torch.optim.AdamW(fsdp.parameters(), lr=3e-3))}
    checked, comm.check = comm.check, False  # torch's collectives compare no signatures either
    try:
        out = {name: float("inf") for name in steps}
        for _ in range(rounds):  # alternate, so the machine's load hits both alike
            for name, step in steps.items():
                out[name] = min(out[name], _timed(comm, step, repeats))
    finally:
        comm.check = checked
    for engine in engines.values():
        engine.remove_hooks()
    return out


class _NoZero:
    """``opt.step()`` / ``opt.zero_grad()`` for a ZeroDataParallel (it owns its optimizer)."""

    def __init__(self, engine):
        self.engine = engine

    def step(self) -> None:
        self.engine.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """ZeroDataParallel.step already released its gradients."""


def measure(n: int, layers: int, hidden: int, batch: int, dtype: str, repeats: int,
            with_torch: bool = True, progress: bool = True, rounds: int = 1) -> dict:
    """{'local': {name: (s, held, sent)} of the slowest rank, 'torch': {name: s}}."""
    from tqdm import tqdm

    from parlab.comm import World

    backends = ["local"] + (["torch"] if with_torch else [])
    result: dict = {}
    for backend in tqdm(backends, desc="bench zero", unit="world", leave=False, disable=not progress):
        with World(n, backend=backend, timeout=300) as world:
            if backend == "local":
                res = world.run(parlab_worker, layers, hidden, batch, dtype, repeats, STAGES)
                result["local"] = {k: max((r[k] for r in res), key=lambda v: v[0]) for k in res[0]}
            else:
                res = world.run(torch_worker, layers, hidden, batch, dtype, repeats, rounds)
                result["torch"] = {k: max(r[k] for r in res) for k in res[0]}
    return result


def run(args: argparse.Namespace) -> int:
    if not 2 <= args.ranks <= 8:
        raise SystemExit(f"--ranks must be between 2 and 8, got {args.ranks}")
    for name in ("layers", "hidden", "batch", "repeats", "rounds"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.hidden % 4:
        raise SystemExit(f"--hidden must be divisible by TinyGPT's 4 heads, got {args.hidden}")
    result = measure(args.ranks, args.layers, args.hidden, args.batch, args.dtype, args.repeats,
                     not args.skip_torch, rounds=args.rounds)
    local = result["local"]
    base_s, base_held, base_sent = local["DDP"]
    print(f"TinyGPT {args.layers} layers, h = {args.hidden}, {args.batch} sequences per rank, "
          f"{args.ranks} ranks; ZeRO in {args.dtype} (DDP fp32); best of {args.repeats} steps")
    print(f"{'':8} {'step ms':>8} {'/ DDP':>6} {'peak KiB held':>14} {'/ DDP':>6} {'KiB sent':>9} {'/ DDP':>6}")
    for name, (s, held, sent) in local.items():
        print(f"{name:8} {s * 1e3:8.1f} {s / base_s:6.2f} {held / 1024:14.1f} {held / base_held:6.2f} "
              f"{sent / 1024:9.1f} {sent / base_sent:6.2f}")
    if "torch" not in result:
        return 0
    t = result["torch"]
    print(f"torch backend (gloo), fp32 AdamW, {args.rounds} alternating rounds, no signature check:")
    for ours, theirs in (("ZeRO-1", "torch ZeroRedundancyOptimizer"), ("ZeRO-3", "torch FSDP2")):
        print(f"  parlab {ours} {t[ours] * 1e3:.1f} ms, {theirs} {t[theirs] * 1e3:.1f} ms -> "
              f"torch / parlab = {t[theirs] / t[ours]:.2f}x")
    ratio = t["torch ZeroRedundancyOptimizer"] / t["ZeRO-1"]
    print(f"parlab ZeRO-1 vs torch ZeroRedundancyOptimizer, {args.ranks} ranks: {ratio:.2f}x "
          f"(target >= {TARGET:g}x): {'ok' if ratio >= TARGET else 'BELOW TARGET'}")
    return int(ratio < TARGET)
