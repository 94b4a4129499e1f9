"""Drill questions on guide part 4 (4.1-4.5): inference speed, DeepSpeed stages, host files,
multi-node bandwidth, NCCL settings."""

from __future__ import annotations

from parlab.costmodel import custom_link, get_gpu, zero_model_states
from parlab.course.guide_tables import GUIDE_4_1

from .questions import MultipleChoice, Named, Numeric, Posed

NCCL_VARS = ("NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME", "NCCL_P2P_DISABLE", "NCCL_DEBUG")


def _hbm_ratio(_rng) -> Posed:
    a800, v100 = get_gpu("a800"), get_gpu("v100")
    r = a800.hbm_bytes_per_s / v100.hbm_bytes_per_s
    return Posed("Decoding one token reads every weight once. By how many times does the A800's HBM "
                 "bandwidth exceed the V100's?", r,
                 f"parlab GPU presets: {a800.hbm_bytes_per_s / 1e9:,.0f} / {v100.hbm_bytes_per_s / 1e9:,.0f} "
                 f"GB/s = {r:.3g}x, yet the guide's own rows make the V100 only {v100_slower_by():.0%} slower per "
                 f"character (the slopes of their straight lines, chapter 11; the guide rounds it to "
                 f"{GUIDE_4_1['v100_slower_by']:.0%}): fixed per-token overheads (kernel launches, Python, "
                 "sampling) do not speed up with bandwidth.")


def v100_slower_by() -> float:
    """How much slower the V100 answers than the A800 per character in guide 4.1's own rows: the
    ratio of the slopes of their straight lines (``guide_tables.line_fit``), as chapter 11 prints."""
    from parlab.course.guide_tables import line_fit

    return line_fit("v100").slope / line_fit("a800").slope - 1


def _stage3_saving(rng) -> Posed:
    n = rng.choice((1.3e9, 6.7e9, 7e9, 13e9, 30e9))
    dp = rng.choice((2, 4, 8, 16))
    s2, s3 = zero_model_states(n, dp, 2), zero_model_states(n, dp, 3)
    saved = s2.total - s3.total
    return Posed(f"{n / 1e9:g}B parameters, mixed-precision Adam, {dp} GPUs: how many GB of model states "
                 "per GPU does ZeRO stage 3 save over stage 2?", saved,
                 f"parlab zero_model_states: stage 2 {s2.total / 1e9:.4g} GB, stage 3 {s3.total / 1e9:.4g} "
                 f"GB: stage 3 also shards the 2-byte weights, saving 2 Psi (1 - 1/dp) = "
                 f"{saved / 1e9:.4g} GB, for 50% more traffic.", {"n_params": n, "dp": dp})


def _bandwidth_ratio(_rng) -> Posed:
    r = custom_link(800).bandwidth / custom_link(64).bandwidth
    return Posed("The guide's cluster went from 64 Gb/s to 800 Gb/s between machines. How many times "
                 "more bandwidth is that?", r, f"{r:g}x: gradient all-reduce time falls by about as much "
                 "while it is bandwidth-bound.")


QUESTIONS = [
    # -- 4.1 inference speed -----------------------------------------------------------------------
    Numeric("hbm-a800-v100", "4.1", "inference", _hbm_ratio, "ratio", "", 0.02,
            why="Autoregressive decoding at batch 1 is bound by memory bandwidth.", random_parameters=False),
    MultipleChoice(
        "decode-bound", "4.1", "inference",
        prompt="At batch size 1, what limits how fast a 6B model generates each token?",
        correct="Memory bandwidth: every token reads all the weights (and the KV cache) from HBM",
        wrong=("Peak tensor-core FLOP/s",
               "PCIe bandwidth to the CPU",
               "The tokenizer"),
        why="About 2N FLOPs per token against 2N bytes read: arithmetic intensity ~1 FLOP/byte, far "
            "below what a GPU needs to be compute-bound."),
    MultipleChoice(
        "decode-length", "4.1", "inference",
        prompt="How does ChatGLM's inference time grow with the answer's length in the guide's tables?",
        correct="About linearly: each generated token costs roughly the same time",
        wrong=("Quadratically, because attention dominates at these lengths",
               "It is constant: the prompt's prefill dominates",
               "Logarithmically, thanks to the KV cache"),
        why="With a KV cache each step reads the weights plus a cache that is small next to them at a "
            "few hundred tokens; about 1 s per 100 characters on the A800."),
    # -- 4.2 DeepSpeed stages ----------------------------------------------------------------------
    MultipleChoice(
        "stage2-vs-3", "4.2", "zero",
        prompt="The guide compares DeepSpeed ZeRO stage 2 and 3 and keeps stage 2 when memory suffices. Why?",
        correct="Stage 3 also gathers the weights in every forward and backward, so it communicates more and runs slower",
        wrong=("Stage 2 shards more than stage 3",
               "Stage 3 cannot use mixed precision",
               "Stage 2 needs no communication at all"),
        why="Stage 2: reduce-scatter gradients, all-gather updated weights (about DP's volume). Stage 3 "
            "adds per-layer all-gathers of the weights: 1.5x the traffic."),
    Numeric("stage3-saving", "4.2", "zero", _stage3_saving, "bytes", "GB", 0.01,
            why="The memory stage 3 buys is the sharded 16-bit weights."),
    Named("ds-stage-key", "4.2", "launching",
          prompt="In a DeepSpeed JSON config, which key sets the ZeRO stage?",
          options=("zero_optimization.stage", "optimizer.type", "fp16.enabled", "train_batch_size"),
          answer="zero_optimization.stage", aliases=("zero_optimization", "stage"),
          why='For example {"zero_optimization": {"stage": 2, "overlap_comm": true}}.'),
    # -- 4.3 host not found --------------------------------------------------------------------------
    MultipleChoice(
        "hostfile-ip", "4.3", "launching",
        prompt="A multi-node DeepSpeed launch fails with 'host not found'. What fixed it in the guide?",
        correct="Writing IP addresses, not host names, in the hostfile",
        wrong=("Setting NCCL_DEBUG=INFO", "Using ZeRO stage 3", "Running on one node"),
        why="The launcher reaches each worker over ssh by the hostfile's names; names that do not "
            "resolve on every node (no DNS or /etc/hosts entry) fail, IPs do not."),
    MultipleChoice(
        "hostfile-format", "4.3", "launching",
        prompt="What does a line of a DeepSpeed hostfile look like?",
        correct="10.0.0.2 slots=8",
        wrong=("10.0.0.2:29500", "--nnodes=2 --nproc_per_node=8", "MASTER_ADDR=10.0.0.2"),
        why="One line per node: an address and how many GPUs (slots) to use on it."),
    # -- 4.4 slower on several machines --------------------------------------------------------------
    MultipleChoice(
        "multinode-slow", "4.4", "network",
        prompt="Training on several machines ran slower than on one. Monitoring showed the network link "
               "saturated. What is going on?",
        correct="Gradient traffic per step exceeds what 64 Gb/s carries in the compute time, so GPUs wait on the network",
        wrong=("The GPUs of the other machines are slower",
               "The data loader cannot keep up on several machines",
               "NCCL falls back to the CPU when more than one machine is used"),
        why="Inside a machine GPUs talk over NVLink/PCIe; across machines every step's all-reduce "
            "crosses the network. Raising it to 800 Gb/s fixed it."),
    Numeric("800-vs-64", "4.4", "network", _bandwidth_ratio, "ratio", "", 0.01,
            why="Network speeds in Gb/s, per direction.", random_parameters=False),
    MultipleChoice(
        "linear-scaling", "4.4", "data parallel",
        prompt="With enough bandwidth the guide saw 4 machines take a quarter of one machine's epoch time. "
               "When does that linear scaling hold?",
        correct="When the gradient all-reduce hides behind compute, so each machine's step time stays the same",
        wrong=("Always: data parallelism scales linearly by definition",
               "Only with ZeRO-3",
               "Only if the batch per GPU shrinks by 4"),
        why="Each machine processes 1/4 of the epoch at the same step time only if communication is "
            "not exposed; chapter 11 finds the bandwidth where this starts."),
    # -- 4.5 NCCL settings -------------------------------------------------------------------------------
    Named("nccl-ifname", "4.5", "launching",
          prompt="Which NCCL variable chooses the network interface (e.g. eth0) for its socket transport?",
          options=NCCL_VARS, answer="NCCL_SOCKET_IFNAME", aliases=("socket_ifname", "ifname"),
          why="Machines with docker0, lo and several NICs need it set to the interface the nodes share."),
    Named("nccl-ib", "4.5", "launching",
          prompt="Which NCCL variable, set to 1, stops NCCL from using InfiniBand/RoCE so that it falls "
                 "back to TCP sockets?",
          options=NCCL_VARS, answer="NCCL_IB_DISABLE", aliases=("ib_disable",),
          why="Useful when an IB device is present but not wired between the nodes."),
    Named("nccl-p2p", "4.5", "launching",
          prompt="Which NCCL variable disables direct GPU-to-GPU transfers inside a node (NVLink/PCIe "
                 "peer-to-peer), routing them through host memory?",
          options=NCCL_VARS, answer="NCCL_P2P_DISABLE", aliases=("p2p_disable",),
          why="A workaround for broken peer-to-peer (some virtual machines, ACS on PCIe switches), at a "
              "cost in intra-node bandwidth."),
    Named("nccl-debug", "4.5", "launching",
          prompt="Which NCCL variable makes it print which transports and interfaces it chose?",
          options=NCCL_VARS, answer="NCCL_DEBUG", aliases=("debug",),
          why="NCCL_DEBUG=INFO logs the rings and trees, the transport (NET/IB, NET/Socket, P2P, SHM) "
              "and the interface used."),
    MultipleChoice(
        "deepspeed-env", "4.5", "launching",
        prompt="Why does the guide put the NCCL variables in a .deepspeed_env file?",
        correct="The DeepSpeed launcher exports that file's variables on every node it starts over ssh",
        wrong=("NCCL reads .deepspeed_env by itself",
               "It is a DeepSpeed JSON config field",
               "Variables set in the shell are always inherited by remote nodes"),
        why="An export in the launching shell reaches only the local node; ~/.deepspeed_env (or one in "
            "the working directory) is forwarded to each remote worker."),
]
