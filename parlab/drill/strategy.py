"""Drill questions on guide part 3 (3.1-3.5): choosing a framework and a stack, and the decision
rules for one GPU, one node and several nodes."""

from __future__ import annotations

from parlab.costmodel import GPUS, get_model
from parlab.costmodel.answers.phases import one_gpu_fit

from .questions import MultipleChoice, Named, Posed

_MODELS = ("gpt3-6.7b", "llama-7b", "llama-13b", "gpt3-13b", "chatglm-6b")
_GPUS = tuple(GPUS)
PLANS = ("data parallel", "tensor parallel", "pipeline parallel", "CPU offload")


def _fits_one_gpu(rng) -> Posed:
    """Answered by ``phases.one_gpu_fit``: chapter 09's one-GPU walk, every term, against the card
    (the same count chapter 10's one-GPU levers start from)."""
    model, gpu = rng.choice(_MODELS), rng.choice(_GPUS)
    recompute = rng.choice(("none", "full"))
    fit = one_gpu_fit(model, gpu, 1, recompute)
    answer = "yes" if fit.fits else "no"
    grads = "fp32" if fit.fp32_grads else "16-bit"
    gb = [fit.added(t) / 1e9 for t in ("model states", "activations", "fp32 gradients", "optimizer step",
                                         "runtime buffers", "fragmentation")]
    return Posed(f"Does full training of {model} ({get_model(model).num_params() / 1e9:.3g}B parameters; "
                 f"{fit.dtype} mixed precision with {grads} gradients, fp32 master weights and Adam, micro-batch 1, "
                 f"recompute {recompute}) fit on one {gpu} ({fit.capacity / 1e9:.3g} GB)?", answer,
                 f"parlab one_gpu_fit (chapter 09's one-GPU walk): model states {gb[0]:.4g} GB + activations "
                 f"{gb[1]:.3g} GB + gradients beyond 16 bits {gb[2]:.3g} GB + the optimizer step's fp32 gradient "
                 f"copy {gb[3]:.3g} GB + runtime buffers {gb[4]:.3g} GB + fragmentation {gb[5]:.3g} GB = "
                 f"{fit.total / 1e9:.4g} GB against {fit.capacity / 1e9:.3g} GB: {answer}. When it does not fit: "
                 "recomputation, 8-bit Adam or LoRA first (chapter 10), then CPU offload (ZeRO-Offload), or shard "
                 "over several GPUs.",
                 {"model": model, "gpu": gpu, "recompute": recompute, "dtype": fit.dtype, "grads": grads})


QUESTIONS = [
    # -- 3.1 framework ------------------------------------------------------------------------------
    MultipleChoice(
        "framework-criteria", "3.1", "frameworks",
        prompt="Which set of criteria does the guide list for choosing a distributed training framework?",
        correct="Training cost, which parallelisms it supports, how little code it takes to adopt, and portability",
        wrong=("Its GitHub stars, its licence and its logo",
               "Only peak TFLOP/s on one GPU",
               "Whether it is written in C++"),
        why="Cost dominates at scale; then coverage of DP/TP/PP/hybrid/auto, the lines of code needed "
            "to distribute a model, and whether it runs across platforms."),
    MultipleChoice(
        "framework-cost", "3.1", "strategy",
        prompt="Two frameworks train the same model; one reaches 45% MFU, the other 30%. What does that "
               "mean for cost?",
        correct="The second needs 1.5 times the GPU-hours for the same run",
        wrong=("Nothing: MFU does not affect cost",
               "The second is 15% more expensive",
               "The first needs 1.5 times the GPUs"),
        why="Time = FLOPs / (GPUs x peak x MFU): at a fixed FLOP count GPU-hours scale as 1/MFU, "
            "here 45/30 = 1.5."),
    # -- 3.2 stack ------------------------------------------------------------------------------------
    Named("tpu-compiler", "3.2", "frameworks",
          prompt="On the TPU stack, which compiler sits between JAX/TensorFlow and the chip?",
          options=("XLA", "NCCL", "CUDA", "Triton"), answer="XLA",
          why="TPU + XLA + TensorFlow/JAX, tied to Google Cloud; the GPU stack is PyTorch + NCCL with "
              "Megatron-LM and DeepSpeed on top."),
    MultipleChoice(
        "gpu-stack", "3.2", "frameworks",
        prompt="Which is the GPU stack the guide calls the most widely used?",
        correct="GPU + PyTorch + Megatron-LM + DeepSpeed",
        wrong=("GPU + TensorFlow + Horovod only", "TPU + PyTorch/XLA + DeepSpeed", "GPU + JAX + Alpa"),
        why="Backed by NVIDIA, Meta and Microsoft, with the largest community."),
    # -- 3.3 one GPU ------------------------------------------------------------------------------------
    MultipleChoice(
        "one-gpu-rule", "3.3", "strategy",
        prompt="Training on one GPU and the model does not fit. What is the guide's answer?",
        correct="Offload to the CPU (ZeRO-Offload): keep optimizer states and the step in host memory",
        wrong=("Tensor parallelism on the one GPU", "Use fp32 to avoid overflow", "Increase the batch size"),
        why="For full-parameter training one GPU has nothing to shard over, so host memory is the spare "
            "room; before offload, chapter 10 prices the cheaper levers (recomputation, 8-bit Adam, "
            "LoRA/QLoRA for fine-tuning)."),
    Named("fits-one-gpu", "3.3", "memory",
          options=("yes", "no"), make=_fits_one_gpu,
          why="Every term of the one-GPU walk (chapter 09) against the card's capacity: model states, "
              "activations, gradients kept in fp32, the optimizer step, runtime buffers and fragmentation."),
    # -- 3.4 one node -------------------------------------------------------------------------------------
    Named("one-node-fits", "3.4", "strategy",
          prompt="One node with several GPUs, and the model fits on one GPU. Which does the guide use "
                 "first?",
          options=PLANS, answer="data parallel", aliases=("ddp", "dp", "zero", "ddp or zero"),
          why="DDP, or ZeRO to free memory for larger batches."),
    Named("one-node-no-nvlink", "3.4", "strategy",
          prompt="One node, the model does not fit on one GPU, and the GPUs talk over PCIe only (no "
                 "NVLink). Which does the guide recommend?",
          options=PLANS, answer="pipeline parallel", aliases=("pp", "pipeline"),
          why="Without NVLink TP's per-layer all-reduces are slow; PP sends only boundary activations. "
              "Chapter 10 sets the advisor's numbers beside this rule."),
    MultipleChoice(
        "one-node-nvlink", "3.4", "strategy",
        prompt="One NVLink node, the model does not fit on one GPU. Which are the guide's options?",
        correct="TP, ZeRO or PP",
        wrong=("Only DDP", "Only CPU offload", "Only more nodes"),
        why="With NVLink all three work; TP is natural within the node's 8 GPUs."),
    # -- 3.5 several nodes -----------------------------------------------------------------------------------
    MultipleChoice(
        "multi-node-fast", "3.5", "strategy",
        prompt="Several nodes with a fast network. What does the guide suggest, and what is the trade-off?",
        correct="ZeRO or 3D parallelism; 3D moves less data but needs more changes to the model code",
        wrong=("Only pipeline parallelism, because the network is shared",
               "Tensor parallelism across all nodes",
               "ZeRO-3 is never usable across nodes"),
        why="ZeRO needs no model changes but gathers weights every step; 3D keeps TP in the node and "
            "sends activations between stages."),
    MultipleChoice(
        "multi-node-slow", "3.5", "strategy",
        prompt="Several nodes, a slow network, little GPU memory. What does the guide combine?",
        correct="DP + PP + TP + ZeRO-1",
        wrong=("ZeRO-3 alone", "Pure data parallelism with large buckets", "TP across nodes"),
        why="ZeRO-1 shards the optimizer states without adding traffic over DP's all-reduce; PP keeps "
            "inter-node traffic to boundary activations."),
    MultipleChoice(
        "poorest-cluster", "3.5", "strategy",
        prompt="No NVLink and 10 GbE between nodes: what does the guide's closing summary rely on?",
        correct="Mainly pipeline parallelism, plus ZeRO-1",
        wrong=("Tensor parallelism, plus ZeRO-3", "Pure data parallelism", "ZeRO-3 with offload over 10 GbE"),
        why="TP is out without NVLink, DP alone lacks memory; PP and ZeRO-1 ask the least of the "
            "hardware. Chapter 10's advisor tests this against the cost model."),
]
