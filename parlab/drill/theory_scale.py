"""Drill questions on guide part 1, sections 1.10-1.22: one GPU, N GPUs, combining, ZeRO vs 3D,
commodity clusters, memory optimisations, frameworks."""

from __future__ import annotations

import numpy as np

from parlab.costmodel import (
    alphabeta,
    bytes_per_param,
    get_link,
    guide_1_19,
    largest_model,
    model_state_memory,
    zero3_traffic_per_step,
    zero_paper_example,
)
from parlab.course.guide import CLAIMS
from parlab.data import read_csv

from .questions import MultipleChoice, Named, Numeric, Posed

FRAMEWORKS = ("PyTorch DDP", "Megatron-LM", "DeepSpeed", "Colossal-AI", "Alpa", "GPipe")


def sharding_alone() -> str:
    """The course's one position on ZeRO-3/FSDP without TP or PP at 100B+ scale (chapters 07 and 08,
    this card), with the published evidence read from ``parlab/data``."""
    rows = read_csv("megatron2021_zero3")
    big = max(int(r["gpus"]) for r in rows)
    z3, ptdp = (next(float(r["tflops_per_gpu"]) for r in rows if r["scheme"] == k and int(r["gpus"]) == big)
                for k in ("zero3", "ptd-p"))
    return ("ZeRO-3/FSDP alone does not train 100B+-class models efficiently on those clusters; the published "
            "runs combine it with TP: OPT-175B used FSDP together with Megatron-LM TP = 8 (Zhang et al. 2022, "
            f"Sec. 2.4), and GPT-3 175B under ZeRO-3 alone ran at {z3:g} TFLOP/s per GPU on {big:,} A100s against "
            f"PTD-P's {ptdp:g} (Narayanan et al. 2021, Table 2).")


_SHARDING_ALONE = sharding_alone()


RULE = CLAIMS["finetune-bytes-per-param"].value  # the guide's "20n GB for an n-billion model"
_SEVEN_B = model_state_memory(7e9, "mixed", "adam")  # the guide's nominal "7B model" of 1.10


def _per_param(_rng) -> Posed:
    b, one = bytes_per_param("mixed", "adam"), model_state_memory(1, "mixed", "adam")
    return Posed(f"The guide budgets about {RULE:g}n GB to fine-tune an n-billion-parameter model on one "
                 "GPU. How many bytes per parameter do the model states alone take with mixed precision "
                 "and Adam?", b,
                 f"parlab model_state_memory: {one.weights:g} (16-bit weights) + {one.grads:g} (16-bit "
                 f"gradients) + {one.master:g} (fp32 master) + {one.optimizer_states:g} (Adam moments) = "
                 f"{b:g} bytes; the other ~{RULE - b:g}n GB is activations, buffers and fragmentation.")


def _fp16_weights_80gb(_rng) -> Posed:
    n = largest_model(80e9, "fp16", "none")
    return Posed("How many parameters fit in 80 GB (80e9 bytes) as fp16 weights alone (inference, no "
                 "activations)?", n, f"parlab largest_model: 80e9 / 2 bytes = {n / 1e9:.4g}B.")


def _train_80gb(_rng) -> Posed:
    n = largest_model(80e9, "mixed", "adam")
    return Posed("How many parameters can be trained in 80 GB (80e9 bytes) with mixed precision and "
                 "Adam, counting model states only?", n,
                 f"parlab largest_model: 80e9 / {bytes_per_param():g} bytes = {n / 1e9:.4g}B; the guide "
                 f"says {CLAIMS['80gb-train-params'].value / 1e9:g}B is the limit. Activations lower it.")


def _zero3_paper(_rng) -> Posed:
    gb = zero_paper_example()[3]
    return Posed("The ZeRO paper's example: 7.5B parameters, mixed-precision Adam, 64 GPUs. How many GB "
                 "of model states does each GPU hold with ZeRO-3?", gb * 1e9,
                 f"parlab zero_model_states: 16 x 7.5e9 / 64 = {gb:.4g} GB (from 120 GB unsharded).")


def _zero3_vs_dp(_rng) -> Posed:
    n, dp = 7e9, 64
    dp_bytes = alphabeta.shape("all_reduce", "ring", dp, model_state_memory(n).grads)[1]
    ratio = zero3_traffic_per_step(n, dp) / dp_bytes
    return Posed("Per step and GPU, how many times the traffic of plain data parallelism (one ring "
                 "all-reduce of 16-bit gradients) does ZeRO-3 send, without recompute?", ratio,
                 f"parlab: ZeRO-3 gathers the weights twice and reduce-scatters the gradients, 3 Psi "
                 f"elements against the all-reduce's 2 Psi: {ratio:.3g}x (ZeRO paper, Sec. 7.2.2).")


def _ten_gbe(_rng) -> Posed:
    bw = get_link("10gbe").bandwidth
    return Posed("How many bytes per second does a 10 Gb/s Ethernet link carry in one direction at line "
                 "rate? Answer in GB/s.", bw, f"10 Gb/s / 8 bits per byte = {bw / 1e9:g} GB/s.")


def _ib_vs_eth(_rng) -> Posed:
    r = get_link("ib-ndr").bandwidth / get_link("10gbe").bandwidth
    return Posed("A 400 Gb/s InfiniBand NDR port against a 10 Gb/s Ethernet port: how many times "
                 "faster is its line rate?", r, f"400 / 10 = {r:g}x per port; a DGX node has 8 such "
                 "ports where a commodity server often has one 10 GbE port for all its GPUs.")


def _guide_1_19_bytes(_rng) -> Posed:
    g = guide_1_19()
    return Posed(f"The guide's 65B example with ZeRO-3: counting 2 bytes per bf16 element, how many GB "
                 f"does each GPU send per step (one micro-batch, no recompute, {g.dp} GPUs, ring "
                 "collectives)?", g.bytes_fp16,
                 f"parlab zero3_traffic_per_step: {g.n_params:.4g} params x (2 gathers x 2 B + 2 B of "
                 f"gradients) x (n-1)/n = {g.bytes_fp16 / 1e9:.4g} GB. The guide's "
                 f"{CLAIMS['65b-zero3-bytes'].value / 1e9:g} 'GB' is 3 Psi elements read as bytes, so "
                 f"its {CLAIMS['65b-zero3-seconds'].value:g} s is about half the line-rate time of "
                 f"{g.seconds_line_rate:.3g} s.")


def _fp16_max(_rng) -> Posed:
    top = float(np.finfo(np.float16).max)
    return Posed("What is the largest finite fp16 value?", top,
                 f"numpy.finfo(float16).max = {top:g} (5 exponent bits, 10 mantissa bits); the guide's "
                 "65506 is a typo. bf16 has fp32's 8 exponent bits, so it overflows near 3.4e38.")


QUESTIONS = [
    # -- 1.10 one GPU -----------------------------------------------------------------------
    Numeric("bytes-per-param", "1.10", "memory", _per_param, "bytes/param", "bytes/param", 0.0,
            why="Model states per parameter set the floor of any single-GPU budget.",
            random_parameters=False),
    MultipleChoice(
        "finetune-7b", "1.10", "memory",
        prompt=f"By the guide's rule of thumb (about {RULE:g}n GB for an n-billion model), can a 7B model "
               "be fully fine-tuned with Adam on one 80 GB GPU?",
        correct=f"No: it needs about {7 * RULE:g} GB; use LoRA, offload, ZeRO across GPUs, or an 8-bit "
                "optimizer",
        wrong=("Yes: 7B x 2 bytes = 14 GB of fp16 weights fits easily",
               "Yes, if the batch size is 1",
               "No, because fp16 cannot represent 7B distinct weights"),
        why=f"Weights alone ({_SEVEN_B.weights / 1e9:g} GB) fit; weights + gradients + fp32 master + Adam "
            f"({_SEVEN_B.bytes_per_param:g} B/param = {_SEVEN_B.total / 1e9:g} GB) plus activations do not."),
    # -- 1.11 N big GPUs --------------------------------------------------------------------
    MultipleChoice(
        "n-gpus-fit", "1.11", "data parallel",
        prompt="Each of N GPUs can hold the whole training job. How do you use them to train faster?",
        correct="Data parallelism: each GPU runs a replica on 1/N of the batch, gradients are all-reduced",
        wrong=("Pipeline parallelism over the N GPUs, so each holds fewer layers",
               "Tensor parallelism, which has the least communication",
               "Run N independent trainings and average the final weights"),
        why="When memory is not the problem, DP is the simplest and most efficient: compute per GPU "
            "stays constant and only the gradients travel."),
    MultipleChoice(
        "dp-scaling-limit", "1.11", "data parallel",
        prompt="What keeps data parallelism on N GPUs from being exactly N times faster?",
        correct="The gradient all-reduce that is not hidden behind the backward pass, and the larger global batch it implies",
        wrong=("Each GPU must recompute the other GPUs' forward passes",
               "The optimizer step runs N times per iteration",
               "Nothing: DP always scales linearly"),
        why="Compute per GPU is fixed; the all-reduce of ~2 x gradient bytes per GPU is the overhead, "
            "and the batch N x b may exceed what converges well."),
    # -- 1.12 does not fit ------------------------------------------------------------------
    MultipleChoice(
        "device-map", "1.12", "pipeline",
        prompt="Hugging Face accelerate's device_map='auto' puts consecutive layers on different GPUs. "
               "What does it amount to?",
        correct="A naive pipeline: one micro-batch, so only one GPU computes at a time",
        wrong=("Tensor parallelism: every GPU computes every layer",
               "Data parallelism with a sharded optimizer",
               "A GPipe pipeline with as many micro-batches as GPUs"),
        why="The model fits across the GPUs, but with one batch in flight the bubble is (p-1)/p."),
    # -- 1.13 PP inference is serial --------------------------------------------------------
    MultipleChoice(
        "pp-inference-alt", "1.13", "tensor parallel",
        prompt="Layer-wise splitting makes inference serial: one GPU works while the others wait. What "
               "splits the work so that all GPUs compute the same layer at once?",
        correct="Tensor parallelism: split each layer's matrices across GPUs",
        wrong=("More pipeline stages", "Data parallelism with batch size 1", "ZeRO-3 parameter sharding"),
        why="PP is a horizontal cut between layers; TP a vertical cut inside each layer, so all GPUs "
            "share every layer's matmul (at the price of an all-reduce per block)."),
    Named("deepspeed-mp", "1.13", "frameworks",
          prompt="In DeepSpeed's vocabulary, tensor parallelism is called what?",
          options=("model parallelism", "pipeline parallelism", "ZeRO", "expert parallelism"),
          answer="model parallelism", aliases=("mp", "model parallel"),
          why="DeepSpeed's mpu / 'MP size' means Megatron-style tensor slicing."),
    # -- 1.14 combining, one 80 GB card ------------------------------------------------------
    Numeric("80gb-fp16", "1.14", "memory", _fp16_weights_80gb, "count", "", 0.01,
            why="Inference needs the weights, 2 bytes each in fp16.", random_parameters=False),
    Numeric("80gb-train", "1.14", "memory", _train_80gb, "count", "", 0.01,
            why="Training needs 16 bytes per parameter before any activation.", random_parameters=False),
    MultipleChoice(
        "combine", "1.14", "3d parallel",
        prompt="Can data, tensor and pipeline parallelism be used together?",
        correct="Yes: that is 3D parallelism; at 100B+ scale the published runs combine them, sharding alone is not enough",
        wrong=("No: TP and PP both split the model, so they exclude each other",
               "Only DP with one of the other two",
               "Only on TPUs"),
        why="Megatron-LM's PTD-P trains 1T parameters on 3072 GPUs with all three (Narayanan et al. 2021). "
            + _SHARDING_ALONE),
    # -- 1.15 Colossal-AI nD ------------------------------------------------------------------
    MultipleChoice(
        "colossal-nd", "1.15", "tensor parallel",
        prompt="What are Colossal-AI's 1D/2D/2.5D/3D parallelism?",
        correct="Ways to split the matrices of tensor parallelism over a line, grid or cube of GPUs",
        wrong=("Another name for combining DP, TP and PP",
               "Pipeline schedules with 1, 2, 2.5 or 3 micro-batches per stage",
               "ZeRO stages 1-3 plus offload"),
        why="1D is Megatron's split; 2D uses SUMMA on a q x q grid, 2.5D (Tesseract) adds depth, 3D "
            "splits over a cube: all tensor parallelism, unrelated to 3D = DP x TP x PP."),
    MultipleChoice(
        "colossal-2d-why", "1.15", "tensor parallel",
        prompt="What do 2D/2.5D/3D tensor parallelism gain over 1D (Megatron) tensor parallelism?",
        correct="Less memory and communication per GPU as the TP degree grows, since no GPU holds a full activation",
        wrong=("They need no communication at all",
               "They remove the pipeline bubble",
               "They let TP cross nodes with no cost"),
        why="1D replicates the layer's inputs and outputs on every rank and all-reduces full "
            "activations; splitting both operands over a grid shrinks both per GPU."),
    # -- 1.16 other ways ----------------------------------------------------------------------
    Named("fsdp-like", "1.16", "zero",
          prompt="PyTorch FSDP (full sharding) corresponds to which ZeRO stage?",
          options=("ZeRO-1", "ZeRO-2", "ZeRO-3"), answer="ZeRO-3", aliases=("3", "stage 3", "zero3"),
          why="FULL_SHARD shards parameters, gradients and optimizer states and gathers each unit's "
              "weights just in time, as ZeRO-3 does; SHARD_GRAD_OP is ZeRO-2."),
    Named("zero-shards-params", "1.16", "zero",
          prompt="Which is the lowest ZeRO stage that also shards the 16-bit parameters?",
          options=("ZeRO-1", "ZeRO-2", "ZeRO-3"), answer="ZeRO-3", aliases=("3", "stage 3", "zero3"),
          why="Stage 1 shards the optimizer states, 2 adds the gradients, 3 adds the parameters."),
    Numeric("zero3-paper", "1.16", "zero", _zero3_paper, "bytes", "GB", 0.01,
            why="ZeRO-3 divides all 16 bytes per parameter by the DP size.", random_parameters=False),
    # -- 1.17 why 3D with ZeRO ----------------------------------------------------------------
    Numeric("zero3-vs-dp-traffic", "1.17", "zero", _zero3_vs_dp, "ratio", "", 0.02,
            why="ZeRO-3 trades memory for 50% more traffic than DP.", random_parameters=False),
    MultipleChoice(
        "zero-vs-3d-scale", "1.17", "zero",
        prompt="At a fixed global batch, why does ZeRO-3 fall behind 3D parallelism at thousands of GPUs "
               "(Megatron-LM 2021, Fig. 10)?",
        correct="Each GPU's batch shrinks, so its per-layer weight gathers no longer hide behind compute",
        wrong=("ZeRO-3 cannot use more than 1024 GPUs",
               "ZeRO-3 keeps a full model copy on every GPU",
               "3D parallelism sends no data between nodes"),
        why="ZeRO-3's traffic per GPU is fixed by the model size; its compute per GPU falls as 1/N. 3D "
            "keeps TP inside the node and sends only activations between stages."),
    MultipleChoice(
        "tp-across-nodes", "1.17", "tensor parallel",
        prompt="Why is tensor parallelism kept inside one node?",
        correct="It all-reduces activations several times per layer, which only NVLink-class bandwidth sustains",
        wrong=("NCCL cannot form groups across nodes",
               "Its weights must be in the same host memory",
               "It needs the same random seed on every GPU"),
        why="The ZeRO paper reports TP across nodes falling to a few percent of peak; within a node "
            "NVLink carries hundreds of GB/s."),
    # -- 1.18 3D for ordinary teams -----------------------------------------------------------
    Numeric("10gbe-bytes", "1.18", "network", _ten_gbe, "rate", "GB/s", 0.01,
            why="Networks are quoted in bits per second; divide by 8.", random_parameters=False),
    Numeric("ib-vs-10gbe", "1.18", "network", _ib_vs_eth, "ratio", "", 0.01,
            why="The gap between a training cluster's fabric and an ordinary data-centre network.",
            random_parameters=False),
    MultipleChoice(
        "tp-no-nvlink", "1.18", "strategy",
        prompt="The guide says: no NVLink, no TP. What does parlab's advisor find for a PCIe cluster "
               "with one 10 GbE port per node?",
        correct="TP inside a node can still win: PCIe is far faster than each GPU's share of 10 GbE, and TP shrinks what crosses nodes",
        wrong=("TP is always impossible without NVLink",
               "The advisor always picks pure data parallelism",
               "TP is faster over Ethernet than over PCIe"),
        why="What matters is TP's link against the alternatives' links; parlab's tp_without_nvlink "
            "scenario shows how robust that choice is to slower PCIe."),
    # -- 1.19 ZeRO-3 on 10 GbE ----------------------------------------------------------------
    Numeric("guide-1-19-bytes", "1.19", "zero", _guide_1_19_bytes, "bytes", "GB", 0.02,
            why="ZeRO-3's per-step traffic is a multiple of the parameter count, in bytes per element.",
            random_parameters=False),
    MultipleChoice(
        "guide-1-19-error", "1.19", "zero",
        prompt=f"The guide counts 3 x 65B per GPU per step for ZeRO-3 and calls it "
               f"{CLAIMS['65b-zero3-bytes'].value / 1e9:g} GB. What is loose about it?",
        correct="3 x 65B counts elements; in bf16 each is 2 bytes, so the bytes (and seconds) are about double",
        wrong=("Nothing: 3 bytes per parameter is ZeRO-3's traffic",
               "ZeRO-3 sends nothing per step once the weights are sharded",
               "It should be 16 bytes per parameter, the model-state size"),
        why="Two all-gathers of 16-bit weights and one reduce-scatter of 16-bit gradients: about 6 bytes "
            "per parameter per GPU per micro-batch, recompute or not (the backward's gather serves the "
            "recomputed forward)."),
    # -- 1.20 techniques ----------------------------------------------------------------------
    Named("alpa-category", "1.20", "frameworks",
          prompt="Which project searches inter- and intra-operator parallel plans automatically?",
          options=FRAMEWORKS, answer="Alpa",
          why="Alpa (Zheng et al. 2022) compiles a plan: an ILP for intra-operator sharding inside "
              "stages and a dynamic program for the stage split."),
    MultipleChoice(
        "pipedream-2bw", "1.20", "pipeline",
        prompt="PipeDream-2BW and PipeDream-Flush are variants of which technique?",
        correct="Pipeline parallelism (asynchronous with two weight versions, and synchronous 1F1B)",
        wrong=("Tensor parallelism with 2 blocks of weights",
               "ZeRO with two buffers",
               "Data parallelism with two replicas per GPU"),
        why="2BW keeps two weight versions to avoid flushes; Flush (1F1B) flushes every step "
            "(Narayanan et al. 2021)."),
    MultipleChoice(
        "zero-category", "1.20", "zero",
        prompt="In which family do ZeRO and PyTorch FSDP belong?",
        correct="Sharded data parallelism: each DP rank keeps a slice of the model states",
        wrong=("Tensor parallelism", "Pipeline parallelism", "Activation checkpointing"),
        why="Every rank still runs the whole model on its own data; the optimizer states, gradients and "
            "(stage 3) weights are partitioned over the DP group."),
    # -- 1.21 memory optimisations ------------------------------------------------------------
    MultipleChoice(
        "recompute-trade", "1.21", "memory optimizations",
        prompt="What does activation recomputation (checkpointing) trade?",
        correct="Extra forward compute in the backward pass for less stored activation memory",
        wrong=("Extra memory for less compute",
               "Precision for speed",
               "Communication for memory, like offload"),
        why="Full recompute keeps only each layer's input and reruns the forward: about 33% more "
            "FLOPs (4 passes instead of 3)."),
    MultipleChoice(
        "offload-what", "1.21", "memory optimizations",
        prompt="What do ZeRO-Offload and ZeRO-Infinity move to CPU memory (or NVMe)?",
        correct="Optimizer states (and optionally parameters), with the optimizer step on the CPU",
        wrong=("The activations of the forward pass only",
               "The dataset", "The NCCL communication buffers"),
        why="They trade PCIe traffic and CPU time for GPU memory (Ren et al. 2021; Rajbhandari et al. 2021)."),
    Numeric("fp16-max", "1.21", "memory optimizations", _fp16_max, "count", "", 0.0,
            why="fp16 overflows to inf beyond its largest finite value, which loss scaling must avoid.",
            random_parameters=False),
    Named("bf16-vs-fp16", "1.21", "memory optimizations",
          prompt="Which 16-bit format has the same exponent range as fp32, so it rarely overflows and "
                 "needs no loss scaling?",
          options=("fp16", "bf16", "fp8", "int8"), answer="bf16", aliases=("bfloat16",),
          why="bf16 keeps 8 exponent bits and 7 mantissa bits; fp16 has 5 and 10."),
    # -- 1.22 frameworks ----------------------------------------------------------------------
    Named("megatron-known", "1.22", "frameworks",
          prompt="Which framework is best known for tensor (intra-layer) model parallelism?",
          options=FRAMEWORKS, answer="Megatron-LM", aliases=("megatron",),
          why="Megatron-LM introduced the column/row-parallel transformer block (Shoeybi et al. 2019)."),
    Named("deepspeed-known", "1.22", "frameworks",
          prompt="Which framework is best known for ZeRO (sharded data parallelism) and offload?",
          options=FRAMEWORKS, answer="DeepSpeed",
          why="DeepSpeed (Microsoft) ships ZeRO stages 1-3, ZeRO-Offload and ZeRO-Infinity."),
    MultipleChoice(
        "framework-kinds", "1.22", "frameworks",
        prompt="Which of these is a library built on an existing deep-learning framework, not a "
               "framework's own distributed feature?",
        correct="DeepSpeed (on PyTorch)",
        wrong=("PyTorch DistributedDataParallel", "TensorFlow's tf.distribute", "MindSpore's auto-parallel"),
        why="The guide's two kinds: features built into TensorFlow, PyTorch, MindSpore, OneFlow, "
            "PaddlePaddle; extensions such as Megatron-LM, DeepSpeed, Colossal-AI, Alpa."),
]
