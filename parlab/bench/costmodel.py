"""``parlab bench costmodel``: how fast the analytic model answers (estimate, search, validation)."""

from __future__ import annotations

import argparse

from parlab.cli import options

HELP = ("time estimate() and search() of a dense and an MoE model (target: estimate << 1 ms, search over "
        "1024 GPUs < 1 s)")
TP, PP = 8, 8  # the timed plan: GPT-3's Megatron layout, dp = gpus / 64


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=options.model, default="gpt3-175b",
                        help="model preset or size (default gpt3-175b)")
    parser.add_argument("--gpus", type=options.positive_int, default=1024,
                        help=f"GPU count for the search, a multiple of {TP * PP} (default 1024)")
    parser.add_argument("--global-batch", type=options.positive_int, default=1536,
                        help="sequences per step (default 1536)")
    parser.add_argument("--moe-model", type=options.model, default="deepseek-v3",
                        help="MoE model whose search is timed too, on the same GPUs and batch (default deepseek-v3)")
    parser.add_argument("--repeat", type=options.positive_int, default=2000,
                        help="estimate() calls to average (default 2000)")


def _best_of(fn, repeat: int = 3) -> float:
    import time

    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(args: argparse.Namespace) -> int:
    from parlab.costmodel import Plan, estimate, make_cluster, search
    from parlab.tables import human_seconds, plural, table

    if args.gpus % (TP * PP):
        raise ValueError(f"--gpus must be a multiple of {TP * PP} (the timed plan is tp={TP} x pp={PP} x dp), "
                         f"got {args.gpus}")
    model, cluster = args.model, make_cluster("dgx-a100", args.gpus)
    plan = Plan(dp=args.gpus // (TP * PP), tp=TP, pp=PP, micro_batch=1, global_batch=args.global_batch,
                recompute="selective", sequence_parallel=True)
    estimate(model, cluster, plan)  # a plan that breaks a rule fails here, before anything is timed

    def many_estimates():
        for _ in range(args.repeat):
            estimate(model, cluster, plan)

    per_estimate = _best_of(many_estimates) / args.repeat
    result = search(model, cluster, args.global_batch)
    best = result.best()
    per_search = _best_of(lambda: search(model, cluster, args.global_batch))
    moe = search(args.moe_model, cluster, args.global_batch)  # ep x dp x tp x pp: many more plans per GPU count
    per_moe = _best_of(lambda: search(args.moe_model, cluster, args.global_batch))
    rows = [["estimate() one plan", human_seconds(per_estimate), "well under 1 ms"],
            [f"search() {plural(args.gpus, 'GPU')}, {plural(result.tried, 'plan')}", human_seconds(per_search),
             "well under 1 s"],
            ["  per plan tried", human_seconds(per_search / max(1, result.tried)), ""],
            [f"search() MoE {args.moe_model.name}, {plural(moe.tried, 'plan')}", human_seconds(per_moe),
             "under 1 s"],
            ["  per plan tried", human_seconds(per_moe / max(1, moe.tried)), ""]]
    print(f"{model.name} on {cluster.describe()}, global batch {args.global_batch} (best of 3 runs)\n")
    print(table(rows, ["what", "time", "target"], "lrl"))
    print(f"\nbest plan: {best.plan.describe()} ({human_seconds(best.step_time)} per step)")
    return 0
