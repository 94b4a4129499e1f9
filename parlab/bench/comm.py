"""``parlab bench comm``: the local backend against torch.distributed (gloo), measured side by side.

For each rank count, collective and size it times the local backend (shared memory, the
algorithm it picks by default: ``shm_direct`` for large all-reduces of 3+ ranks, the ring
otherwise) and gloo (``torch.distributed``, called directly as a torch user would) on two warm
``World``s, alternating the two for ``--rounds`` rounds so that a busy machine slows both alike.
A round's time is the best of ``--repeats`` calls (each call timed by its slowest rank); the
table shows the MEDIAN over the rounds of each, their ratio gloo / local (above 1: local is
faster), the range of the per-round ratios, and the local bus bandwidth (nccl-tests'
definition) next to this machine's memcpy bandwidth. Then the start-up cost: a cold ``launch``
against a warm ``World.run`` of a function that returns at once; and the overlap that
``async_op=True`` buys: compute alone, all-reduce alone, and the two together.
Targets (issues 9 and 17), each a median ratio gloo / local: at least 1.0x for every collective
at every size on every rank count, at least 2x from 4 MiB up on 4 ranks; a warm run under 20 ms
on 4 ranks. Each is printed as a verdict; ``run`` returns 1 when one is missed (``parlab bench
comm --check`` then exits 1; without it a missed target is reported, with the load it ran under).
"""

from __future__ import annotations

import argparse
import time

HELP = "local shared-memory backend vs torch.distributed gloo: collectives and launch latency"
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
MIN_RATIO = 1.0  # gloo / local at every size: local at least as fast as gloo
LARGE_RATIO, LARGE_BYTES, LARGE_RANKS = 2.0, 4 << 20, 4  # and twice as fast from 4 MiB on 4 ranks
WARM_TARGET_S = 0.020  # a warm World.run on 4 ranks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ranks", default="2,4", help="rank counts, comma-separated (default 2,4)")
    parser.add_argument("--sizes", default="1K,16K,1M,16M",
                        help="float32 elements of the full buffer, comma-separated, K/M suffixes "
                             "(default 1K,16K,1M,16M: 4 KiB to 64 MiB)")
    parser.add_argument("--ops", default=",".join(OPS), help=f"collectives (default {','.join(OPS)})")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per size and round (default 5)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="alternating local/gloo rounds; the table shows medians (default 5)")
    parser.add_argument("--launches", type=int, default=3,
                        help="cold launches timed per backend and rank count (default 3)")


def _count(typed: str) -> int:
    text = typed.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit():
        raise ValueError(f"--sizes takes element counts such as 1000, 16K or 1M, got {typed!r}")
    value = int(digits)
    if value <= 0:
        raise ValueError(f"sizes must be positive element counts, got {text!r}")
    return value * scale


def _buffers(op: str, n: int, elems: int, backend: str):
    """(input, output) float32 buffers for one call on one rank; elems is the full buffer."""
    import numpy as np

    elems -= elems % n
    shapes = {"all_reduce": (elems, None), "all_gather": (elems // n, elems),
              "reduce_scatter": (elems, elems // n), "broadcast": (elems, None)}
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
                 "reduce_scatter": lambda x, o: dist.reduce_scatter_single(o, x),
                 "broadcast": lambda x, o: dist.broadcast(x, 0)}
        barrier = dist.barrier
    else:
        calls = {"all_reduce": lambda x, o: comm.all_reduce(x, inplace=True),
                 "all_gather": lambda x, o: comm.all_gather(x, out=o),
                 "reduce_scatter": lambda x, o: comm.reduce_scatter(x, out=o),
                 "broadcast": lambda x, o: comm.broadcast(x, 0, inplace=True)}
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


def _algorithm_of(comm, op: str, elems: int) -> str:
    """The algorithm the local backend picks for ``op`` on a float32 buffer of elems."""
    return comm._algorithm(op, None, 4 * (elems - elems % comm.world_size))


def overlap(comm, elems: int, repeats: int) -> dict:
    """Runs on every rank: seconds of an all-reduce of ``elems`` float32 alone, of a compute
    step sized to take about as long (matmuls), and of the two together (``async_op=True``,
    compute, ``wait``); the same with a "device" step that waits as long without using a core
    (what the host sees while a GPU computes). The sizes are rank 0's on every rank."""
    import numpy as np

    x = np.ones(elems, np.float32)
    a = np.ones((256, 256), np.float32)
    steps = [1]

    def compute() -> None:
        for _ in range(steps[0]):
            a @ a  # numpy's matmul releases the GIL: the communication thread runs meanwhile

    def timed(step) -> float:
        step()
        best = float("inf")
        for _ in range(repeats):
            comm.barrier()
            t = time.perf_counter()
            step()
            best = min(best, time.perf_counter() - t)
        return best

    def both() -> None:
        work = comm.all_reduce(x, inplace=True, async_op=True)
        compute()
        work.wait()

    def device() -> None:  # compute that leaves the host's cores free, as a GPU kernel does
        time.sleep(wait_s)

    def both_device() -> None:
        work = comm.all_reduce(x, inplace=True, async_op=True)
        device()
        work.wait()

    reduce_s = timed(lambda: comm.all_reduce(x, inplace=True))
    one = timed(compute)
    steps[0] = int(comm.broadcast(np.array([max(1, round(reduce_s / max(one, 1e-6)))]), 0)[0])
    wait_s = float(comm.broadcast(np.array([reduce_s]), 0)[0])
    return {"compute": timed(compute), "all_reduce": reduce_s, "both": timed(both),
            "device": timed(device), "both_device": timed(both_device)}


def _median(values: list[float]) -> float:
    v = sorted(values)
    k = len(v) // 2
    return v[k] if len(v) % 2 else (v[k - 1] + v[k]) / 2


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

    if not all(r.strip().isdigit() for r in args.ranks.split(",")):
        raise ValueError(f"--ranks takes rank counts such as 2,4, got {args.ranks!r}")
    ranks = [int(r) for r in args.ranks.split(",")]
    sizes = [_count(s) for s in args.sizes.split(",")]
    ops = [o.strip() for o in args.ops.split(",")]
    for o in ops:
        if o not in OPS:
            raise ValueError(f"unknown op {o!r}; allowed: {', '.join(OPS)}")
    if any(r < 2 for r in ranks) or args.repeats < 1 or args.rounds < 1 or args.launches < 1:
        raise ValueError("--ranks must be >= 2, --repeats, --rounds and --launches >= 1")

    from parlab.comm import World

    per_round: dict[tuple, list[float]] = {}
    algos: dict[tuple, str] = {}
    warm: dict[tuple, list[float]] = {}
    overlaps: dict[str, list[float]] = {}
    worlds = {(n, b): World(n, backend=b, timeout=300) for n in ranks for b in ("local", "torch")}
    try:
        jobs = [(n, b) for _ in range(args.rounds) for n in ranks for b in ("local", "torch")]
        for n, backend in tqdm(jobs, desc="bench comm", unit="round", leave=False):
            world = worlds[(n, backend)]
            per_rank = world.run(timed_calls, ops, sizes, args.repeats, backend)
            for key in per_rank[0]:
                slowest = [max(r[key][i] for r in per_rank) for i in range(args.repeats)]
                per_round.setdefault((backend, n, *key), []).append(min(slowest))
        for n in ranks:
            for op in ops:
                for elems in sizes:
                    algos[(n, op, elems)] = worlds[(n, "local")].run(_algorithm_of, op, elems)[0]
            for backend in ("local", "torch"):
                world = worlds[(n, backend)]
                times = []
                for _ in range(10):
                    t = time.perf_counter()
                    world.run(_noop)
                    times.append(time.perf_counter() - t)
                warm[(backend, n)] = times
        n_over = min(ranks)
        for _ in range(args.rounds):
            per_rank = worlds[(n_over, "local")].run(overlap, max(sizes), args.repeats)
            for k in per_rank[0]:
                overlaps.setdefault(k, []).append(max(r[k] for r in per_rank))
    finally:
        for world in worlds.values():
            world.close()

    memcpy = memcpy_bandwidth()
    rows = []
    ratios: dict[tuple, float] = {}
    for n in ranks:
        for op in ops:
            for elems in sizes:
                locs, glos = per_round[("local", n, op, elems)], per_round[("torch", n, op, elems)]
                loc, glo = _median(locs), _median(glos)
                ratios[(op, n, elems)] = glo / loc
                each = [g / lo for g, lo in zip(glos, locs, strict=True)]
                nbytes = 4 * (elems - elems % n)
                busbw = alphabeta.bus_bandwidth(op, n, nbytes, loc)
                algo = algos[(n, op, elems)]
                rows.append([n, op, algo, human_ibytes(nbytes, "g"), f"{loc * 1e3:.2f}", f"{glo * 1e3:.2f}",
                             f"{glo / loc:.2f}x", f"{min(each):.2f}-{max(each):.2f}", f"{busbw / 1e9:.2f}"])
    print(f"median of {args.rounds} rounds (each the best of {args.repeats} calls):")
    from parlab.cli.fit import dropped_note, fit_table

    text, dropped = fit_table(rows, ["ranks", "op", "local algorithm", "size", "local (ms)", "gloo (ms)",
                                     "gloo/local", "per round", "local busbw (GB/s)"], "rllrrrrrr",
                              droppable=["per round", "local busbw (GB/s)"], wide=getattr(args, "wide", False))
    print(text + ("\n" + dropped_note(dropped) if dropped else ""))
    print(f"memcpy bandwidth of this machine: {memcpy / 1e9:.2f} GB/s (one 64 MiB np.copyto)")

    print(f"\nlaunch latency: a cold launch of a function that returns at once (best of {args.launches}), "
          "against a warm World.run of it (median of 10):")
    lat = []
    for backend in ("local", "torch"):
        for n in ranks:
            times = []
            for _ in range(args.launches):
                t = time.perf_counter()
                launch(_noop, n, backend=backend)
                times.append(time.perf_counter() - t)
            w = _median(warm[(backend, n)])
            lat.append([backend, n, f"{min(times) * 1e3:.0f}", f"{w * 1e3:.1f}", f"{min(times) / w:.0f}x"])
    print(table(lat, ["backend", "ranks", "launch (ms)", "World.run (ms)", "launch/run"], "lrrrr"))

    c, a, b = (_median(overlaps[k]) for k in ("compute", "all_reduce", "both"))
    print(f"\noverlap on {n_over} ranks (local, all-reduce of {human_ibytes(4 * max(sizes), 'g')}, "
          f"median of {args.rounds}): compute {c * 1e3:.2f} ms + all-reduce {a * 1e3:.2f} ms = "
          f"{(c + a) * 1e3:.2f} ms in sequence; async_op=True: {b * 1e3:.2f} ms together "
          f"({(c + a) / b:.2f}x)")
    d, bd = (_median(overlaps[k]) for k in ("device", "both_device"))
    print(f"  with compute that leaves the cores free (a sleep, as a GPU kernel leaves the host): "
          f"{d * 1e3:.2f} ms + {a * 1e3:.2f} ms in sequence; together {bd * 1e3:.2f} ms "
          f"({(d + a) / bd:.2f}x). On CPU ranks, host compute and communication share the cores.")

    code = 0
    warm4 = [_median(warm[(b, 4)]) for b in ("local", "torch") if (b, 4) in warm]
    if warm4:
        ok = max(warm4) < WARM_TARGET_S
        print(f"warm World.run on 4 ranks: {', '.join(f'{w * 1e3:.1f} ms' for w in warm4)} (local, "
              f"torch; target < {WARM_TARGET_S * 1e3:.0f} ms): {'ok' if ok else 'ABOVE TARGET'}")
    missed = [(op, n, elems, ratio) for (op, n, elems), ratio in ratios.items()
              if ratio < _target(n, 4 * (elems - elems % n))]
    for op, n, elems, ratio in missed:
        print(f"{op} of {human_ibytes(4 * (elems - elems % n), 'g')} on {n} ranks: local is "
              f"{ratio:.2f}x gloo's speed (target >= {_target(n, 4 * elems):g}x): BELOW TARGET")
    print(f"\nlocal vs gloo: {len(ratios) - len(missed)} of {len(ratios)} (op, ranks, size) at or above "
          f"target (>= {MIN_RATIO:g}x everywhere, >= {LARGE_RATIO:g}x from "
          f"{human_ibytes(LARGE_BYTES, 'g')} on {LARGE_RANKS} ranks): {'ok' if not missed else 'BELOW TARGET'}")
    if warm4 and max(warm4) >= WARM_TARGET_S:
        code = 1
    return 1 if missed else code


def _target(n: int, nbytes: int) -> float:
    """The ratio gloo / local that local must reach for this rank count and buffer size."""
    return LARGE_RATIO if n == LARGE_RANKS and nbytes >= LARGE_BYTES else MIN_RATIO
