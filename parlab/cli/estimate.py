"""``parlab estimate``: memory per GPU and step time of one plan, term by term, with the formula and
source of every term."""

from __future__ import annotations

import argparse

from parlab.cli import options
from parlab.cli.fit import add_wide, fit
from parlab.cli.model_options import add_model_arguments, model_from

HELP = "memory per GPU and step time of one DP/TP/PP/CP/EP/ZeRO plan, with every term explained"


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """Model and cluster options shared by ``estimate`` and ``search``."""
    from parlab.costmodel.specs.cluster import _CLUSTER_ALIASES, CLUSTERS
    from parlab.costmodel.specs.hardware import _GPU_ALIASES, GPUS
    from parlab.costmodel.specs.links import _LINK_ALIASES, LINKS

    add_model_arguments(parser, "gpt3-175b")
    parser.add_argument("--cluster", type=options.name_of("cluster", CLUSTERS, _CLUSTER_ALIASES), default="dgx-a100",
                        help="cluster kind: dgx-a100, dgx-h100, h800-ndr, h20-roce, dgx-b200, gb200-nvl72, "
                             "rtx4090-10gbe, pcie-10gbe, ... (default dgx-a100)")
    parser.add_argument("--gpu", type=options.not_a_count(options.name_of("GPU", GPUS, _GPU_ALIASES), "--gpus"),
                        help="GPU preset overriding the cluster's (a100, h100, h800, h20, b200, rtx4090, ...; "
                             "`parlab gpus` lists them); it brings its own intra-node link unless --intra is given")
    parser.add_argument("--gpus-per-node", type=options.positive_int, help="GPUs per node (default: the cluster's, 8)")
    parser.add_argument("--intra", type=options.name_of("link", LINKS, _LINK_ALIASES),
                        help="intra-node link: nvlink3-a100, nvlink4-h100, pcie4, ...")
    parser.add_argument("--inter", type=options.name_of("link", LINKS, _LINK_ALIASES),
                        help="inter-node link: ib-hdr, ib-ndr, ib-xdr, 10gbe, 25gbe, ...")
    parser.add_argument("--nics", type=options.positive_int, help="network ports per node (default: the cluster's)")


def model_and_cluster(args: argparse.Namespace, n_gpus: int):
    """The ModelSpec and Cluster the options describe (None: the preset's value)."""
    from parlab.costmodel import make_cluster

    model = model_from(args)
    cluster = make_cluster(args.cluster, n_gpus, gpu=args.gpu, gpus_per_node=args.gpus_per_node,
                           intra=args.intra, inter=args.inter, nics_per_node=args.nics)
    return model, cluster


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from parlab.costmodel import CP_IMPLS, OFFLOADS, SCHEDULES
    from parlab.costmodel.pricing.activation_terms import RECOMPUTE_MODULES
    from parlab.costmodel.pricing.memory import PLAN_RECOMPUTE
    from parlab.costmodel.specs.fp8 import FP8_RECIPES

    add_cluster_arguments(parser)
    pos = options.positive_int
    parser.add_argument("--gpus", type=pos, help="GPU count (default dp x tp x pp x cp)")
    parser.add_argument("--dp", type=pos, help="data-parallel size (default gpus / (tp x pp x cp), else 1)")
    parser.add_argument("--tp", type=pos, default=1, help="tensor-parallel size")
    parser.add_argument("--pp", type=pos, default=1, help="pipeline-parallel size")
    parser.add_argument("--cp", type=pos, default=1, help="context-parallel size (splits each sequence)")
    parser.add_argument("--cp-impl", type=options.name_of("cp method", CP_IMPLS), default="ring",
                        help="how cp > 1 splits attention: ring, ulysses or all-gather (Llama 3)")
    parser.add_argument("--ep", type=pos, default=1, help="expert-parallel size (MoE models; divides dp x cp)")
    parser.add_argument("--zero", type=options.zero_stage, default=0, help="ZeRO stage 0-3")
    parser.add_argument("--micro-batch", type=pos, default=1, help="sequences per micro-batch")
    parser.add_argument("--global-batch", type=pos, help="sequences per step (default dp x micro-batch)")
    parser.add_argument("--schedule", type=options.name_of("schedule", SCHEDULES), default="1f1b",
                        help="gpipe, 1f1b or interleaved")
    parser.add_argument("--chunks", type=pos, default=1, help="model chunks per GPU (interleaved)")
    parser.add_argument("--first-stage-layers", type=pos, help="layers on the first pipeline stage (Megatron-Core)")
    parser.add_argument("--last-stage-layers", type=pos, help="layers on the last pipeline stage (Megatron-Core)")
    parser.add_argument("--embedding-as-layer", action="store_true",
                        help="count the embedding as a layer of the pipeline split (Llama 3 405B)")
    parser.add_argument("--loss-as-layer", action="store_true",
                        help="count the loss as a layer of the pipeline split (Llama 3 405B)")
    parser.add_argument("--recompute", type=options.name_of("recompute", PLAN_RECOMPUTE), default="none",
                        help="none, selective, full or modules (with --recompute-modules)")
    parser.add_argument("--recompute-modules", type=options.listed(options.name_of(
        "recompute module", RECOMPUTE_MODULES), "recompute modules"), default=[],
                        help="Megatron-Core's recompute modules, e.g. mlp,core_attn (implies --recompute modules)")
    parser.add_argument("--sp", action="store_true", help="sequence parallelism (needs tp > 1)")
    parser.add_argument("--offload", type=options.name_of("offload", OFFLOADS), default="none",
                        help="none, optimizer or optimizer+params")
    parser.add_argument("--dtype", type=options.dtype, default="bf16",
                        help="bf16 (fp32 gradients, as Megatron-LM and DeepSpeed keep them) or fp16 (mixed precision), mixed (bf16, 16-bit gradients), fp32, "
                             "fp8 (bf16 with the linear layers' GEMMs in FP8: Hopper, Ada, Blackwell, MI300X)")
    parser.add_argument("--fp8-recipe", type=options.name_of("FP8 recipe", FP8_RECIPES), default=None,
                        help="with --dtype fp8: te-delayed (default), te-current, deepseek-blockwise, mxfp8 (Blackwell)")
    parser.add_argument("--fp32-grads", action="store_true", default=None,
                        help="keep gradients in fp32 (the default with bf16; --dtype mixed keeps 16-bit ones)")
    parser.add_argument("--tokens", type=options.token_count,
                        help="also print the time to train on this many tokens, e.g. 300B")
    add_wide(parser)


def run(args: argparse.Namespace) -> int:
    from parlab.costmodel import Plan, estimate
    from parlab.tables import human_count, human_seconds

    dp = args.dp
    if dp is None:
        dp = 1
        if args.gpus is not None:
            cp = f" x {args.cp}" if args.cp > 1 else ""
            if args.gpus % (args.tp * args.pp * args.cp):
                raise ValueError(f"--gpus {args.gpus} is not divisible by --tp x --pp{' x --cp' if cp else ''} = "
                                 f"{args.tp} x {args.pp}{cp}, so no whole data-parallel size exists")
            dp = args.gpus // (args.tp * args.pp * args.cp)
    plan = Plan(dp=dp, tp=args.tp, pp=args.pp, zero=args.zero, micro_batch=args.micro_batch,
                global_batch=args.global_batch, schedule=args.schedule, chunks=args.chunks,
                recompute="modules" if args.recompute_modules and args.recompute == "none" else args.recompute,
                recompute_modules=tuple(args.recompute_modules), sequence_parallel=args.sp, offload=args.offload,
                dtype=args.dtype, fp32_grads=args.fp32_grads, first_stage_layers=args.first_stage_layers,
                last_stage_layers=args.last_stage_layers, embedding_as_layer=args.embedding_as_layer,
                loss_as_layer=args.loss_as_layer, cp=args.cp, cp_impl=args.cp_impl,
                ep=args.ep, fp8_recipe=args.fp8_recipe)
    model, cluster = model_and_cluster(args, plan.n_gpus if args.gpus is None else args.gpus)
    est = estimate(model, cluster, plan)
    text = est.explain()
    if args.tokens is not None:
        text += f"\n\ntime to train on {human_count(args.tokens)} tokens: {human_seconds(est.time_to_train(args.tokens))}"
    print(fit(text, args.wide))
    return 0
