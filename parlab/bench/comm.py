"""``parlab bench comm``: the local backend against torch.distributed (gloo), measured side by side.

For each rank count, collective and size it times the local backend (shared memory, parlab's
ring) and gloo (``torch.distributed``, called directly as a torch user would), alternating the
two for ``--rounds`` rounds so that a busy machine slows both alike, and prints the ratio
gloo time / local time (above 1: local is faster) with the local bus bandwidth (nccl-tests'
definition) next to this machine's memcpy bandwidth. Then the launch latency of each backend.
The target of issue 4: an all-reduce of 16M float32 over 4 ranks at least 2x faster than gloo.
"""

from __future__ import annotations

import argparse
import time

HELP = "local shared-memory backend vs torch.distributed gloo: collectives and launch latency"
OPS = ("all_reduce", "all_gather", "reduce_scatter")
TARGET = ("all_reduce", 4, 16 << 20, 2.0)  # op, ranks, float32 elements, minimum ratio


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ranks", default="2,4", help="rank counts, comma-separated (default 2,4)")
    parser.add_argument("--sizes", default="16K,1M,16M",
                        help="float32 elements of the full buffer, comma-separated, K/M suffixes (default 16K,1M,16M)")
    parser.add_argument("--ops", default=",".join(OPS), help=f"collectives (default {','.join(OPS)})")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per size and round (default 5)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating local/gloo rounds (default 3)")


def _count(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    value = int(text[:-1] if scale > 1 else text)
    if value <= 0:
        raise ValueError(f"sizes must be positive element counts, got {text!r}")
    return value * scale


def _buffers(op: str, n: int, elems: int, backend: str):
    """(input, output) float32 buffers for one call on one rank; elems is the full buffer."""
    import numpy as np

    elems -= elems % n
    shapes = {"all_reduce": (elems, None), "all_gather": (elems // n, elems), "reduce_scatter": (elems, elems // n)}
    i, o = shapes[op]
    if backend == "torch":
        import torch

        return torch.ones(i), (None if o is None else torch.empty(o))
    return np.ones(i, np.float32), (None if o is None else np.empty(o, np.float32))


def timed_calls(comm, ops: list[str], sizes: list[int], repeats: int, backend: str) -> dict:
    """Runs on every rank: {(op, elems): [seconds of each call]} after one warm-up call."""
    if backend == "torch":
        import torch.distributed as dist

        calls = {"all_reduce": lambda x, o: dist.all_reduce(x),
                 "all_gather": lambda x, o: dist.all_gather_single(o, x),
                 "reduce_scatter": lambda x, o: dist.reduce_scatter_single(o, x)}
        barrier = dist.barrier
    else:
        calls = {"all_reduce": lambda x, o: comm.all_reduce(x, inplace=True),
                 "all_gather": lambda x, o: comm.all_gather(x, out=o),
                 "reduce_scatter": lambda x, o: comm.reduce_scatter(x, out=o)}
        barrier = comm.barrier
    out = {}
    for op in ops:
        for elems in sizes:
            x, o = _buffers(op, comm.world_size, elems, backend)
            calls[op](x, o)
            times = []
            for _ in range(repeats):
                barrier()
                t = time.perf_counter()
                calls[op](x, o)
                times.append(time.perf_counter() - t)
            out[(op, elems)] = times
    return out


def _noop(comm) -> int:
    return comm.rank


def memcpy_bandwidth(nbytes: int = 64 << 20) -> float:
    """Bytes per second of one large np.copyto on this machine (bytes copied, not read+written)."""
    import numpy as np

    a, b = np.ones(nbytes, np.uint8), np.empty(nbytes, np.uint8)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return nbytes / best


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from parlab.comm import launch
    from parlab.costmodel import alphabeta
    from parlab.tables import human_ibytes, table

    ranks = [int(r) for r in args.ranks.split(",")]
    sizes = [_count(s) for s in args.sizes.split(",")]
    ops = [o.strip() for o in args.ops.split(",")]
    for o in ops:
        if o not in OPS:
            raise ValueError(f"unknown op {o!r}; allowed: {', '.join(OPS)}")
    if any(r < 2 for r in ranks) or args.repeats < 1 or args.rounds < 1:
        raise ValueError("--ranks must be >= 2, --repeats and --rounds >= 1")

    best: dict[tuple, float] = {}
    jobs = [(n, b) for _ in range(args.rounds) for n in ranks for b in ("local", "torch")]
    for n, backend in tqdm(jobs, desc="bench comm", unit="launch", leave=False):
        per_rank = launch(timed_calls, n, ops, sizes, args.repeats, backend, backend=backend, timeout=300)
        for key in per_rank[0]:
            slowest = [max(r[key][i] for r in per_rank) for i in range(args.repeats)]
            k = (backend, n, *key)
            best[k] = min(best.get(k, float("inf")), min(slowest))

    memcpy = memcpy_bandwidth()
    rows = []
    for n in ranks:
        for op in ops:
            for elems in sizes:
                loc, glo = best[("local", n, op, elems)], best[("torch", n, op, elems)]
                nbytes = 4 * (elems - elems % n)
                busbw = alphabeta.bus_bandwidth(op, n, nbytes, loc)
                rows.append([n, op, human_ibytes(nbytes, "g"), f"{loc * 1e3:.2f}", f"{glo * 1e3:.2f}",
                             f"{glo / loc:.2f}x", f"{busbw / 1e9:.2f}"])
    print(table(rows, ["ranks", "op", "size", "local (ms)", "gloo (ms)", "gloo/local",
                       "local busbw (GB/s)"], "rlrrrrr"))
    print(f"memcpy bandwidth of this machine: {memcpy / 1e9:.2f} GB/s (one 64 MiB np.copyto)")

    print("\nlaunch latency (launch of a function that returns at once, best of 3):")
    lat = []
    for backend in ("local", "torch"):
        for n in ranks:
            times = []
            for _ in range(3):
                t = time.perf_counter()
                launch(_noop, n, backend=backend)
                times.append(time.perf_counter() - t)
            lat.append([backend, n, f"{min(times) * 1e3:.0f}"])
    print(table(lat, ["backend", "ranks", "launch (ms)"], "lrr"))

    op, n, elems, target = TARGET
    if op in ops and n in ranks and elems in sizes:
        ratio = best[("torch", n, op, elems)] / best[("local", n, op, elems)]
        verdict = "ok" if ratio >= target else "BELOW TARGET"
        print(f"\n{op} of {elems >> 20}M float32 over {n} ranks: local is {ratio:.2f}x faster than "
              f"gloo (target >= {target:g}x): {verdict}")
        return 0 if ratio >= target else 1
    return 0
