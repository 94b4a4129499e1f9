"""``parlab search``: every valid DP/TP/PP/ZeRO plan for a model on a cluster, fastest first."""

from __future__ import annotations

import argparse

from parlab.cli.estimate import add_cluster_arguments, model_and_cluster

HELP = "rank every valid plan of a model on a cluster by step time (the strategy advisor)"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _words(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_cluster_arguments(parser)
    parser.add_argument("--gpus", type=int, default=64, help="GPU count (default 64)")
    parser.add_argument("--global-batch", type=int, default=512, help="sequences per step (default 512)")
    parser.add_argument("--top", type=int, default=10, help="how many plans to print (default 10)")
    parser.add_argument("--zero", type=_ints, default=[0, 1, 2, 3], help="ZeRO stages to try, e.g. 0,1")
    parser.add_argument("--micro-batches", type=_ints, default=[1, 2, 4, 8, 16], help="micro-batch sizes to try")
    parser.add_argument("--recompute", type=_words, default=["none", "selective", "full"],
                        help="recompute modes to try")
    parser.add_argument("--offload", type=_words, default=["none"],
                        help="offload modes to try: none,optimizer,optimizer+params")
    parser.add_argument("--dtype", default="bf16", help="fp32, fp16 or bf16")
    parser.add_argument("--explain", action="store_true", help="explain the best plan term by term")


def run(args: argparse.Namespace) -> int:
    from parlab.costmodel import search
    from parlab.tables import table

    model, cluster = model_and_cluster(args, args.gpus)
    result = search(model, cluster, args.global_batch, zero_stages=args.zero, micro_batches=args.micro_batches,
                    recompute=args.recompute, offload=args.offload, dtype=args.dtype)
    print(f"{model.name} on {cluster.describe()}, global batch {args.global_batch}")
    print(f"{result.tried} plans tried, {result.valid} valid, {result.fitting} fit in memory\n")
    best = result.best()
    print(table(result.rows(args.top), result.HEADERS, "rlrrrr"))
    print()
    print(best.explain() if args.explain else best.summary())
    return 0
