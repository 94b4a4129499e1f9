"""``parlab bench costmodel``: how fast the analytic model answers (estimate, search, validation)."""

from __future__ import annotations

import argparse

HELP = "time estimate() and search() (target: estimate << 1 ms, search over 1024 GPUs << 1 s)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="gpt3-175b", help="model preset or size (default gpt3-175b)")
    parser.add_argument("--gpus", type=int, default=1024, help="GPU count for the search (default 1024)")
    parser.add_argument("--global-batch", type=int, default=1536, help="sequences per step (default 1536)")
    parser.add_argument("--repeat", type=int, default=2000, help="estimate() calls to average (default 2000)")


def _best_of(fn, repeat: int = 3) -> float:
    import time

    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(args: argparse.Namespace) -> int:
    from parlab.costmodel import Plan, estimate, get_model, make_cluster, search
    from parlab.tables import human_seconds, table

    model = get_model(args.model)
    cluster = make_cluster("dgx-a100", args.gpus)
    plan = Plan(dp=args.gpus // 64, tp=8, pp=8, micro_batch=1, global_batch=args.global_batch,
                recompute="selective", sequence_parallel=True)

    def many_estimates():
        for _ in range(args.repeat):
            estimate(model, cluster, plan)

    per_estimate = _best_of(many_estimates) / args.repeat
    result = search(model, cluster, args.global_batch)
    per_search = _best_of(lambda: search(model, cluster, args.global_batch))
    rows = [["estimate() one plan", human_seconds(per_estimate), "well under 1 ms"],
            [f"search() {args.gpus} GPUs, {result.tried} plans", human_seconds(per_search), "well under 1 s"],
            ["  per plan tried", human_seconds(per_search / max(1, result.tried)), ""]]
    print(f"{model.name} on {cluster.describe()}, global batch {args.global_batch} (best of 3 runs)\n")
    print(table(rows, ["what", "time", "target"], "lrl"))
    print(f"\nbest plan: {result.best().plan.describe()} ({human_seconds(result.best().step_time)} per step)")
    return 0
