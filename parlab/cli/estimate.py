"""``parlab estimate``: memory per GPU and step time of one plan, term by term, with the formula and
source of every term."""

from __future__ import annotations

import argparse

HELP = "memory per GPU and step time of one DP/TP/PP/ZeRO plan, with every term explained"


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """Model and cluster options shared by ``estimate`` and ``search``."""
    parser.add_argument("--model", default="gpt3-175b", help="preset name or size such as 7B (default gpt3-175b)")
    parser.add_argument("--seq", type=int, help="sequence length (default: the model's)")
    parser.add_argument("--cluster", default="dgx-a100",
                        help="cluster kind: dgx-a100, dgx-h100, a800-hdr, pcie-10gbe, ... (default dgx-a100)")
    parser.add_argument("--gpu", help="GPU preset overriding the cluster's (a100, h100, v100, ...)")
    parser.add_argument("--gpus-per-node", type=int, help="GPUs per node (default: the cluster's, 8)")
    parser.add_argument("--intra", help="intra-node link: nvlink3-a100, nvlink4-h100, pcie4, ...")
    parser.add_argument("--inter", help="inter-node link: ib-hdr, ib-ndr, ib-xdr, 10gbe, 25gbe, ...")
    parser.add_argument("--nics", type=int, help="network ports per node (default: the cluster's)")


def model_and_cluster(args: argparse.Namespace, n_gpus: int):
    """The ModelSpec and Cluster the options describe."""
    from parlab.costmodel import get_model, make_cluster

    model = get_model(args.model)
    if args.seq:
        model = model.with_(seq_len=args.seq)
    cluster = make_cluster(args.cluster, n_gpus, gpu=args.gpu, gpus_per_node=args.gpus_per_node,
                           intra=args.intra, inter=args.inter, nics_per_node=args.nics)
    return model, cluster


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_cluster_arguments(parser)
    parser.add_argument("--gpus", type=int, help="GPU count (default dp x tp x pp)")
    parser.add_argument("--dp", type=int, help="data-parallel size (default gpus / (tp x pp), else 1)")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    parser.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    parser.add_argument("--zero", type=int, default=0, choices=range(4), help="ZeRO stage 0-3")
    parser.add_argument("--micro-batch", type=int, default=1, help="sequences per micro-batch")
    parser.add_argument("--global-batch", type=int, help="sequences per step (default dp x micro-batch)")
    parser.add_argument("--schedule", default="1f1b", help="gpipe, 1f1b or interleaved")
    parser.add_argument("--chunks", type=int, default=1, help="model chunks per GPU (interleaved)")
    parser.add_argument("--recompute", default="none", help="none, selective or full")
    parser.add_argument("--sp", action="store_true", help="sequence parallelism (needs tp > 1)")
    parser.add_argument("--offload", default="none", help="none, optimizer or optimizer+params")
    parser.add_argument("--dtype", default="bf16", help="fp32, fp16 or bf16 (mixed precision)")
    parser.add_argument("--fp32-grads", action="store_true", help="accumulate and reduce gradients in fp32")
    parser.add_argument("--tokens", default="", help="also print the time to train on this many tokens, e.g. 300B")


def run(args: argparse.Namespace) -> int:
    from parlab.costmodel import Plan, estimate, parse_size
    from parlab.tables import human_seconds

    dp = args.dp or (args.gpus // (args.tp * args.pp) if args.gpus else 1)
    plan = Plan(dp=dp, tp=args.tp, pp=args.pp, zero=args.zero, micro_batch=args.micro_batch,
                global_batch=args.global_batch, schedule=args.schedule, chunks=args.chunks,
                recompute=args.recompute, sequence_parallel=args.sp, offload=args.offload, dtype=args.dtype,
                fp32_grads=args.fp32_grads)
    model, cluster = model_and_cluster(args, args.gpus or plan.n_gpus)
    est = estimate(model, cluster, plan)
    print(est.explain())
    if args.tokens:
        tokens = parse_size(args.tokens)
        print(f"\ntime to train on {args.tokens} tokens: {human_seconds(est.time_to_train(tokens))}")
    return 0
