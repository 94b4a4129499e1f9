"""``parlab bench pipeline``: one step of each schedule on 4 ranks, parlab's executor against
``torch.distributed.pipelining`` on gloo, and the measured bubble against the simulator's.

For each schedule (GPipe, 1F1B, interleaved 1F1B, ZB-H1; torch has the first three) it runs
``--repeats`` steps of the same TinyGPT and batch (the first is a warm-up, the best of the rest is
kept) with parlab's executor on the local backend and on the torch backend, and with torch's
schedule on gloo, all in one run, and prints torch's step time / parlab's (above 1: parlab is
faster). The local and the torch worlds alternate for ``--rounds`` rounds and every side keeps
its best, so that a change in the machine's load hits both sides alike; parlab's executor runs
without its activation counting (saved-tensor hooks), as torch's counts nothing. Beside each
best step, the CPU time it took, summed over the ranks (``time.process_time``): where ranks
outnumber the cores the step is CPU-bound, and the CPU time says what each executor costs
with less noise than the wall time, which depends on how the OS shares the cores. Then, from
parlab's measured per-rank timeline (local backend): the measured bubble fraction, the
simulator's with equal costs (backward = 2 forwards), and the simulator's with the measured mean
F/B/W times of each stage, which should be close to the measured one.
"""

from __future__ import annotations

import argparse
import time

HELP = "pipeline executor vs torch.distributed.pipelining (gloo) on 4 ranks, and measured bubbles"
NAMES = ("gpipe", "1f1b", "interleaved", "zb-h1")
TARGET = 1.0  # torch pipelining's step / parlab's executor on the local backend, per schedule


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ranks", type=int, default=4, help="pipeline stages = ranks (default 4)")
    parser.add_argument("--m", type=int, default=8, help="micro-batches per step (default 8)")
    parser.add_argument("--batch", type=int, default=32, help="sequences per step (default 32)")
    parser.add_argument("--layers", type=int, default=8, help="TinyGPT layers (default 8)")
    parser.add_argument("--hidden", type=int, default=128, help="TinyGPT hidden size (default 128)")
    parser.add_argument("--repeats", type=int, default=3, help="steps per schedule, the first a "
                        "warm-up (default 3)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating local / torch rounds, each side's best kept (default 3)")


def bench_worker(comm, names, cfg, x, y, m: int, repeats: int, with_torch: bool) -> dict:
    """On every rank: {('parlab' | 'torch', name): (best step seconds, last StageRun or None,
    this rank's CPU seconds in that step)}."""
    from parlab.parallel.pipeline_parallel import TORCH_SCHEDULES, build_chunks, torch_pipeline_step
    from parlab.parallel.pipeline_parallel.executor import check_run, run_schedule
    from parlab.schedules import make_schedule

    out = {}
    for name in names:
        v = 2 if name == "interleaved" else 1
        sched = make_schedule(name, comm.world_size, m, v)
        check_run(comm, sched, cfg, x)
        model, chunks = build_chunks(cfg, sched.p, v, comm.rank)
        best, run, cpu = float("inf"), None, 0.0
        for i in range(repeats):
            for prm in model.parameters():
                prm.grad = None
            comm.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            run = run_schedule(comm, sched, model, chunks, x, y, count_activations=False)
            step_cpu = time.process_time() - c0
            comm.barrier()
            seconds = time.perf_counter() - t0
            if (i or repeats == 1) and seconds < best:
                best, cpu = seconds, step_cpu
        out[("parlab", name)] = (best, run, cpu)
        if with_torch and name in TORCH_SCHEDULES:
            done = torch_pipeline_step(comm, name, cfg, x, y, m, v, repeats)
            timed = list(zip(done["seconds"], done["cpu_seconds"], strict=True))
            seconds, step_cpu = min(timed[1:] or timed)  # the fastest step and its CPU time
            out[("torch", name)] = (seconds, None, step_cpu)
    return out


def measured_costs(sched, runs):
    """Costs with each stage's mean measured F, B and W seconds (a chunk's op times v: the
    simulator's costs are per stage)."""
    from parlab.schedules import Costs

    means = {}
    for kind in ("F", "B", "W"):
        per = []
        for r in runs:
            times = [t1 - t0 for op, t0, t1 in r.spans if op.kind == kind]
            per.append(sched.v * sum(times) / len(times) if times else 0.0)
        means[kind] = per
    return Costs(f=means["F"], b=means["B"], w=means["W"])


STEP_HEADERS = ["schedule", "local (ms)", "gloo (ms)", "torch (ms)", "torch/local", "torch/gloo"]


def step_table(rows) -> str:
    """One step per schedule: parlab on the local backend and on gloo, torch pipelining on gloo,
    and torch's time over parlab's (one row per schedule, cells already formatted)."""
    from parlab.tables import table

    return table(rows, STEP_HEADERS, "lrrrrr")


def run(args: argparse.Namespace) -> int:
    from parlab.comm import launch
    from parlab.parallel import GPTConfig, batches
    from parlab.parallel.pipeline_parallel import measured_timeline
    from parlab.schedules import make_schedule, simulate
    from parlab.tables import table

    if args.ranks < 2 or args.m < 1 or args.repeats < 1 or args.rounds < 1:
        raise ValueError("--ranks must be >= 2, --m, --repeats and --rounds >= 1")
    if args.batch % args.m or args.m % args.ranks:
        raise ValueError(f"--batch ({args.batch}) must be a multiple of --m ({args.m}), and --m a "
                         f"multiple of --ranks ({args.ranks}) for the interleaved schedule")
    if args.layers < 2 * args.ranks:
        raise ValueError(f"--layers ({args.layers}) must be >= 2 x --ranks ({2 * args.ranks}): the "
                         f"interleaved schedule cuts the model into 2 chunks per rank")
    cfg = GPTConfig(n_layer=args.layers, hidden=args.hidden, n_head=4, seq_len=32)
    x, y = next(batches(args.batch, cfg.seq_len))
    results = {}  # (side, schedule): (best step seconds, that round's StageRuns, its CPU s, all ranks)
    for rnd in range(args.rounds):
        for backend in ("local", "torch"):
            print(f"bench pipeline: round {rnd + 1}/{args.rounds}, {args.ranks} ranks, {backend} "
                  f"backend, schedules {', '.join(NAMES)} ({args.repeats} steps each) ...", flush=True)
            t = time.perf_counter()
            per_rank = launch(bench_worker, args.ranks, NAMES, cfg, x, y, args.m, args.repeats,
                              backend == "torch", backend=backend, timeout=300)
            print(f"  done in {time.perf_counter() - t:.1f} s", flush=True)
            for key in per_rank[0]:
                seconds = max(r[key][0] for r in per_rank)  # the slowest rank sets the pace
                label = key[0] if key[0] == "torch" else f"parlab-{backend}"
                if seconds < results.get((label, key[1]), (float("inf"),))[0]:
                    results[(label, key[1])] = (seconds, [r[key][1] for r in per_rank],
                                                sum(r[key][2] for r in per_rank))

    rows = []
    for name in NAMES:
        loc, tor = results[("parlab-local", name)][0], results[("parlab-torch", name)][0]
        pt = results.get(("torch", name), (None,))[0]
        rows.append([name, f"{loc * 1e3:.1f}", f"{tor * 1e3:.1f}",
                     "-" if pt is None else f"{pt * 1e3:.1f}",
                     "-" if pt is None else f"{pt / loc:.2f}x", "-" if pt is None else f"{pt / tor:.2f}x"])
    print(f"\none step, m={args.m}, batch {args.batch}, TinyGPT {args.layers} layers h={args.hidden} "
          f"(best of {max(args.repeats - 1, 1)} x {args.rounds} rounds): parlab on the local backend "
          f"and on gloo, torch pipelining on gloo")
    print(step_table(rows))
    rows = [[name, f"{results[('parlab-local', name)][2] * 1e3:.1f}",
             f"{results[('torch', name)][2] * 1e3:.1f}",
             f"{results[('torch', name)][2] / results[('parlab-local', name)][2]:.2f}x"]
            for name in NAMES if ("torch", name) in results]
    print("\nCPU time of that step, summed over the ranks (where ranks outnumber the cores, the step "
          "takes\nabout this divided by the cores): what each executor costs, less noisy than the "
          "wall time")
    print(table(rows, ["schedule", "local CPU (ms)", "torch CPU (ms)", "torch/local"], "lrrr"))

    rows = []
    for name in NAMES:
        sched = make_schedule(name, args.ranks, args.m, 2 if name == "interleaved" else 1)
        runs = results[("parlab-local", name)][1]
        measured = measured_timeline(sched, runs).bubble_fraction
        equal = simulate(sched).bubble_fraction
        fitted = simulate(sched, measured_costs(sched, runs)).bubble_fraction
        rows.append([name, f"{100 * measured:.1f}", f"{100 * float(equal):.1f}", f"{100 * float(fitted):.1f}"])
    print("\nbubble (% of stage time), parlab local backend:")
    print(table(rows, ["schedule", "measured", "simulated, equal costs", "simulated, measured costs"],
                "lrrr"))
    missed = 0
    for name in (n for n in NAMES if ("torch", n) in results):
        ratio = results[("torch", name)][0] / results[("parlab-local", name)][0]
        missed |= ratio < TARGET
        print(f"parlab {name} (local) vs torch pipelining, {args.ranks} ranks: {ratio:.2f}x "
              f"(target >= {TARGET:g}x): {'ok' if ratio >= TARGET else 'BELOW TARGET'}")
    return int(missed)
