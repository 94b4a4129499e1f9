"""``parlab search``: every valid DP/TP/PP/ZeRO plan for a model on a cluster, fastest first."""

from __future__ import annotations

import argparse

from parlab.cli import options
from parlab.cli.estimate import add_cluster_arguments, model_and_cluster
from parlab.cli.fit import WIDTH, add_wide, fit, fit_table

HELP = "rank every valid plan of a model on a cluster by step time (the strategy advisor)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from parlab.costmodel import CP_IMPLS, OFFLOADS, RECOMPUTE

    add_cluster_arguments(parser)
    pos = options.positive_int
    parser.add_argument("--gpus", type=pos, default=64, help="GPU count (default 64)")
    parser.add_argument("--global-batch", type=pos, default=512, help="sequences per step (default 512)")
    parser.add_argument("--top", type=pos, default=10, help="how many plans to print (default 10)")
    parser.add_argument("--zero", type=options.zero_stages, default=[0, 1, 2, 3], help="ZeRO stages to try, e.g. 0,1")
    parser.add_argument("--micro-batches", type=options.positive_ints, default=[1, 2, 4, 8, 16],
                        help="micro-batch sizes to try, e.g. 1,2,4")
    parser.add_argument("--recompute", type=options.listed(options.name_of("recompute", RECOMPUTE), "recompute modes"),
                        default=list(RECOMPUTE), help="recompute modes to try: none,selective,full")
    parser.add_argument("--offload", type=options.listed(options.name_of("offload", OFFLOADS), "offload modes"),
                        default=["none"], help="offload modes to try: none,optimizer,optimizer+params")
    parser.add_argument("--dtype", type=options.dtype, default="bf16",
                        help="bf16 (fp32 gradients, as Megatron-LM and DeepSpeed keep them) or fp16 (mixed precision), mixed (bf16, 16-bit gradients), fp32, "
                             "fp8 (bf16 with the linear layers' GEMMs in FP8: Hopper, Ada, Blackwell, MI300X)")
    parser.add_argument("--cp", type=options.positive_ints,
                        help="context-parallel sizes to try, e.g. 1,2,4 (default: 1, and more for sequences >= 8K)")
    parser.add_argument("--cp-impl", type=options.listed(options.name_of("cp method", CP_IMPLS), "cp methods"),
                        default=list(CP_IMPLS), help="cp methods to try: ring,ulysses,all-gather (default all)")
    parser.add_argument("--ep", type=options.positive_ints,
                        help="expert-parallel sizes to try, e.g. 1,8 (default: 1, and more for MoE models)")
    parser.add_argument("--explain", action="store_true", help="explain the best plan term by term")
    add_wide(parser)


def run(args: argparse.Namespace) -> int:
    from parlab.costmodel import search

    model, cluster = model_and_cluster(args, args.gpus)
    result = search(model, cluster, args.global_batch, zero_stages=args.zero, micro_batches=args.micro_batches,
                    recompute=args.recompute, offload=args.offload, dtype=args.dtype, cp_impls=args.cp_impl,
                    **({} if args.cp is None else {"cp": args.cp}), **({} if args.ep is None else {"ep": args.ep}))
    best = result.best()  # raises (one line, status 2) before anything is printed when nothing fits
    rows, head = result.rows(args.top), f"{model.name} on {cluster.describe()}, global batch {args.global_batch}"
    dtype = " " + best.plan.dtype  # one --dtype for every plan (describe() ends with it): said once
    if not args.wide and all(str(r[1]).endswith(dtype) for r in rows):
        rows = [[r[0], str(r[1])[: -len(dtype)], *r[2:]] for r in rows]
        head += f",{dtype}"
    text, dropped = fit_table(rows, result.HEADERS, "rlrrrr", droppable=["tokens/s", "MFU"],
                              wide=args.wide)
    print(fit(head, args.wide))
    print(result.counts() + "\n")
    print(text)
    if dropped:
        print(f"({', '.join(dropped)} left out to fit {WIDTH} columns: --wide shows every column)")
    print()
    print(fit(best.explain() if args.explain else best.summary(), args.wide))
    return 0
