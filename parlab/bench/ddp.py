"""``parlab bench ddp``: one DDP training step, parlab's DistributedDataParallel (local backend)
against torch.nn.parallel.DistributedDataParallel (gloo), on 2 and 4 ranks, as a ratio from one
run; then guide 1.5's three measurements on the local backend, each drawn beside the cost
model's curve for a real model on a real link (``parlab.costmodel.plan.data_parallel``):

1. step time with and without overlap (buckets sent during backward, or after it), by rank count;
2. step time against the bucket size;
3. time per micro-batch against the rank count, all-reducing every micro-batch or only the last
   of ``--micro`` (``no_sync``).

Every time is the best of ``--repeats`` steps after one warm-up, between two barriers. The
head-to-head against torch runs ``--rounds`` rounds that alternate the two worlds (both kept
warm: parlab's round, then torch's), so a load that comes and goes hits both alike; each side
keeps its best round. Both run the same TinyGPT, batch, bucket cap and thread count
(``OMP_NUM_THREADS`` as ``launch`` sets it for either backend). The
figures are written to ``--out DIR`` (``ddp_overlap.png``, ``ddp_buckets.png``,
``ddp_no_sync.png``); ``figures(result)`` returns them for a notebook.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

HELP = "DDP step: parlab (local) vs torch DDP (gloo) on 2 and 4 ranks; overlap, buckets, no_sync"
CAPS_MB = (0.01, 0.05, 0.25, 1.0, 4.0)
TARGET = 1.0  # torch DDP's step / parlab DDP's: parlab at least as fast, at 2 and 4 ranks
MODEL, LINK = "1.5B", "ib-hdr"  # the cost model's curves: a real model on a real link


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ranks", default="2,3,4", help="rank counts, comma-separated (default 2,3,4)")
    parser.add_argument("--layers", type=int, default=4, help="TinyGPT layers (default 4)")
    parser.add_argument("--hidden", type=int, default=128, help="TinyGPT hidden size (default 128)")
    parser.add_argument("--batch", type=int, default=8, help="sequences per rank per step (default 8)")
    parser.add_argument("--bucket-mb", type=float, default=0.25, help="bucket cap in MiB (default 0.25)")
    parser.add_argument("--micro", type=int, default=4, help="micro-batches for no_sync (default 4)")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps after a warm-up (default 3)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating parlab / torch rounds of the head-to-head (default 3)")
    parser.add_argument("--out", default=None, help="directory to write the three figures to")


def _timed(comm, step, repeats: int) -> float:
    best = float("inf")
    for i in range(repeats + 1):
        comm.barrier()
        t0 = time.perf_counter()
        step()
        comm.barrier()
        if i:
            best = min(best, time.perf_counter() - t0)
    return best


def _sgd(params) -> None:
    import torch

    with torch.no_grad():
        for p in params:
            p -= 0.01 * p.grad
            p.grad = None


def parlab_worker(comm, layers: int, hidden: int, batch: int, cap: float, micro: int,
                  repeats: int, sweep: bool) -> dict:
    """On every rank: best step seconds of parlab DDP with overlap, without, per micro-batch with
    and without no_sync, and (``sweep``) for each bucket cap of ``CAPS_MB``."""
    from parlab.parallel import batches
    from parlab.parallel.data_parallel import DistributedDataParallel
    from parlab.parallel.model import GPTConfig, TinyGPT

    cfg = GPTConfig(n_layer=layers, hidden=hidden)
    x, y = next(batches(batch * comm.world_size, 32, rank=comm.rank, world=comm.world_size))
    out = {}

    def plain(ddp):
        def step():
            ddp(x, y).backward()
            _sgd(ddp.parameters())
        return step

    for overlap in (True, False):
        ddp = DistributedDataParallel(TinyGPT(cfg), comm, bucket_cap_mb=cap, overlap=overlap)
        out["overlap" if overlap else "no overlap"] = _timed(comm, plain(ddp), repeats)
    ddp = DistributedDataParallel(TinyGPT(cfg), comm, bucket_cap_mb=cap)
    parts = [(x[i::micro], y[i::micro]) for i in range(micro)]

    def every():
        for xm, ym in parts:
            ddp(xm, ym).backward()
        _sgd(ddp.parameters())

    def accumulated():
        with ddp.no_sync():
            for xm, ym in parts[:-1]:
                ddp(xm, ym).backward()
        ddp(*parts[-1]).backward()
        _sgd(ddp.parameters())

    out["sync every micro-batch"] = _timed(comm, every, repeats) / micro
    out["no_sync"] = _timed(comm, accumulated, repeats) / micro
    if sweep:
        for c in CAPS_MB:
            ddp = DistributedDataParallel(TinyGPT(cfg), comm, bucket_cap_mb=c)
            out[("bucket", c)] = _timed(comm, plain(ddp), repeats)
    return out


def parlab_step(comm, layers: int, hidden: int, batch: int, cap: float, repeats: int) -> float:
    """On every rank: best step seconds of parlab DDP (overlap), the twin of ``torch_worker``."""
    from parlab.parallel import batches
    from parlab.parallel.data_parallel import DistributedDataParallel
    from parlab.parallel.model import GPTConfig, TinyGPT

    ddp = DistributedDataParallel(TinyGPT(GPTConfig(n_layer=layers, hidden=hidden)), comm, bucket_cap_mb=cap)
    x, y = next(batches(batch * comm.world_size, 32, rank=comm.rank, world=comm.world_size))

    def step():
        ddp(x, y).backward()
        _sgd(ddp.parameters())

    return _timed(comm, step, repeats)


def torch_worker(comm, layers: int, hidden: int, batch: int, cap: float, repeats: int) -> float:
    """On every rank of a torch-backend world: best step seconds of torch DDP on gloo."""
    import torch

    from parlab.parallel import batches
    from parlab.parallel.model import GPTConfig, TinyGPT

    model = torch.nn.parallel.DistributedDataParallel(TinyGPT(GPTConfig(n_layer=layers, hidden=hidden)),
                                                      bucket_cap_mb=cap)
    x, y = next(batches(batch * comm.world_size, 32, rank=comm.rank, world=comm.world_size))

    def step():
        model(x, y).backward()
        _sgd(model.parameters())

    return _timed(comm, step, repeats)


def measure(ranks: list[int], layers: int, hidden: int, batch: int, cap: float, micro: int,
            repeats: int, progress: bool = True, rounds: int = 3) -> dict:
    """Run every measurement; {n: parlab worker's slowest-rank dict (+ 'torch' and 'parlab', the
    head-to-head's best rounds, for n in 2, 4)}."""
    from tqdm import tqdm

    from parlab.comm import World

    result: dict[int, dict] = {n: {} for n in ranks}
    for n in tqdm(ranks, desc="bench ddp", unit="world", leave=False, disable=not progress):
        with World(n, backend="local", timeout=300) as world:
            res = world.run(parlab_worker, layers, hidden, batch, cap, micro, repeats, n == max(ranks))
            result[n].update(max(res, key=lambda r: r["overlap"]))  # the slowest rank sets the pace
            if n not in (2, 4):
                continue
            with World(n, backend="torch", timeout=300) as rival:
                mine, theirs = [], []
                for _ in range(rounds):  # alternate, so the machine's load hits both alike
                    mine.append(max(world.run(parlab_step, layers, hidden, batch, cap, repeats)))
                    theirs.append(max(rival.run(torch_worker, layers, hidden, batch, cap, repeats)))
                result[n]["parlab"], result[n]["torch"] = min(mine), min(theirs)
    return result


def model_curves(micro: int) -> dict:
    """The cost model's three curves for GPT ``MODEL`` on ``LINK`` (micro-batch 4 per GPU)."""
    from parlab.costmodel.plan.data_parallel import bucket_sweep, ddp_step

    gpus = (8, 16, 32, 64, 128, 256, 512)
    buckets = (0.25, 1, 5, 25, 100, 400, 1600)
    ms = lambda s: s * 1e3  # noqa: E731
    return {
        "overlap": {name: (gpus, [ms(ddp_step(MODEL, n, LINK, micro_batch=4, overlap=o).step_s) for n in gpus])
                    for name, o in (("overlap", True), ("no overlap", False))},
        "buckets": {"step": (buckets, [ms(s.step_s) for s in bucket_sweep(MODEL, 64, LINK, buckets,
                                                                          micro_batch=4)])},
        "no_sync": {"sync every micro-batch": (gpus, [ms(ddp_step(MODEL, n, LINK, micro_batch=4).step_s)
                                                      for n in gpus]),
                    "no_sync": (gpus, [ms(ddp_step(MODEL, n, LINK, micro_batch=4,
                                                   accumulation=micro).step_s) / micro for n in gpus])},
    }


def figures(result: dict, micro: int = 4) -> dict:
    """The three figures, measured (left) beside the cost model (right)."""
    from parlab.viz.data_parallel import curves_figure

    ranks = sorted(result)
    ms = lambda key: [result[n][key] * 1e3 for n in ranks]  # noqa: E731
    model = model_curves(micro)
    big = max(ranks)
    caps = [c for c in CAPS_MB if ("bucket", c) in result[big]]
    model_label = f"GPT {MODEL} on {LINK} (ms)"
    return {
        "ddp_overlap": curves_figure("ranks / GPUs", "step (ms)",
                                     {k: (ranks, ms(k)) for k in ("overlap", "no overlap")},
                                     model["overlap"], model_label, xlog=False),
        "ddp_buckets": curves_figure("bucket size (MiB)", f"step on {big} ranks (ms)",
                                     {"step": (caps, [result[big][("bucket", c)] * 1e3 for c in caps])},
                                     model["buckets"], model_label + ", 64 GPUs", xlog=True),
        "ddp_no_sync": curves_figure("ranks / GPUs", "per micro-batch (ms)",
                                     {k: (ranks, ms(k)) for k in ("sync every micro-batch", "no_sync")},
                                     model["no_sync"], model_label),
    }


def run(args: argparse.Namespace) -> int:
    try:
        ranks = sorted({int(v) for v in str(args.ranks).split(",")})
    except ValueError:
        raise SystemExit(f"--ranks must be comma-separated integers, got {args.ranks!r}") from None
    if not ranks or min(ranks) < 2 or max(ranks) > 8:
        raise SystemExit(f"--ranks must be between 2 and 8, got {args.ranks!r}")
    for name in ("layers", "hidden", "batch", "micro", "repeats", "rounds"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.batch % args.micro:
        raise SystemExit(f"--batch={args.batch} must be divisible by --micro={args.micro}")
    if not args.bucket_mb > 0:
        raise SystemExit(f"--bucket-mb must be > 0, got {args.bucket_mb}")
    result = measure(ranks, args.layers, args.hidden, args.batch, args.bucket_mb, args.micro, args.repeats,
                     rounds=args.rounds)
    print(f"TinyGPT {args.layers} layers, h = {args.hidden}, {args.batch} sequences per rank, "
          f"buckets of {args.bucket_mb:g} MiB; best of {args.repeats} steps")
    for n in ranks:
        r = result[n]
        print(f"{n} ranks: parlab DDP {r['overlap'] * 1e3:.1f} ms (no overlap {r['no overlap'] * 1e3:.1f}); "
              f"per micro-batch: every {r['sync every micro-batch'] * 1e3:.1f}, no_sync {r['no_sync'] * 1e3:.1f}")
        if "torch" in r:
            print(f"  head to head ({args.rounds} alternating rounds): parlab {r['parlab'] * 1e3:.1f} ms, "
                  f"torch DDP (gloo) {r['torch'] * 1e3:.1f} ms -> torch / parlab = "
                  f"{r['torch'] / r['parlab']:.2f}x")
    big = max(ranks)
    print(f"bucket sweep on {big} ranks: " + ", ".join(
        f"{c:g} MiB {result[big][('bucket', c)] * 1e3:.1f} ms" for c in CAPS_MB))
    if args.out:
        from parlab.viz.figures import render_png

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for name, fig in figures(result, args.micro).items():
            (out / f"{name}.png").write_bytes(render_png(fig))
        print(f"figures written to {out}/ (ddp_overlap.png, ddp_buckets.png, ddp_no_sync.png)")
    else:
        print("(pass --out DIR to write the three figures beside the cost model's curves)")
    missed = 0
    for n in (n for n in ranks if "torch" in result[n]):
        ratio = result[n]["torch"] / result[n]["parlab"]
        missed |= ratio < TARGET
        print(f"parlab DDP vs torch DDP, {n} ranks: {ratio:.2f}x (target >= {TARGET:g}x): "
              f"{'ok' if ratio >= TARGET else 'BELOW TARGET'}")
    return int(missed)
