"""Drill questions on guide part 2 (2.1-2.3): 3D layout on DGX A100 nodes, building the system,
choosing DP/TP/PP sizes (MT-NLG and BLOOM)."""

from __future__ import annotations

from parlab.costmodel import Plan, bloom_table, get_model, make_cluster, model_state_memory
from parlab.costmodel.answers.validation import bloom_summary

from .questions import MultipleChoice, Named, Numeric, Posed


def llama7b_states() -> float:
    """LLaMA-7B's model states in mixed precision with Adam (ZeRO paper, 16 B/param): the first row of
    chapter 09's one-GPU walk, the figure chapters 00 and 01 print."""
    return model_state_memory(get_model("llama-7b").num_params(), "mixed", "adam").total


def _mtnlg_replica(_rng) -> Posed:
    plan = Plan(tp=8, pp=35)
    nodes = make_cluster("dgx-a100", plan.n_gpus).nodes
    return Posed("MT-NLG 530B used 8-way tensor parallelism inside each DGX A100 node and 35 pipeline "
                 "stages. How many GPUs hold one model replica?", plan.n_gpus,
                 f"parlab Plan(tp=8, pp=35).n_gpus = {plan.n_gpus} GPUs = {nodes} nodes of 8.")


def _bloom_best_memory(_rng) -> Posed:
    """The measured peak is the answer (BigScience's chronicles); the model's prediction and its
    validated band are shown beside it, so the true answer is never marked wrong."""
    rows = bloom_table()
    row = next(r for r in rows if r.dp == 2)
    band = bloom_summary(rows).band
    return Posed(f"BLOOM's preparation run on {row.gpus} A100s ({row.size}, dp={row.dp}, tp={row.tp}, "
                 f"pp={row.pp}, ZeRO-1, bf16, full recompute): how many GB per GPU did it use at its peak?",
                 row.measured_gb * 1e9,
                 f"BigScience measured {row.measured_gb:g} GB. parlab's cost model predicts {row.predicted_gb:.3g} GB "
                 f"({row.memory_error:+.0%}, inside its validated ±{band:.0%} for BLOOM's memory; DeepSpeed's "
                 f"bf16 optimizer of early 2022 kept about {row.deepspeed_bf16_extra_gb:.2g} GB more than the "
                 "model counts). Doubling DP from the 80-GPU run halves the ZeRO-1 optimizer shard.",
                 {"gpus": row.gpus, "dp": row.dp})


QUESTIONS = [
    # -- 2.1 DGX A100 layout -------------------------------------------------------------------
    MultipleChoice(
        "dgx-tp-first", "2.1", "3d parallel",
        prompt="On many 8-GPU DGX A100 nodes, which parallelism goes inside each node?",
        correct="Tensor parallelism (8-way), because it needs NVLink's bandwidth",
        wrong=("Pipeline parallelism, because its stages must share memory",
               "Data parallelism, because gradients are largest",
               "ZeRO-3, because it needs no fast links"),
        why="TP's all-reduces per layer need ~300 GB/s per direction; PP's point-to-point sends and "
            "DP's once-per-step all-reduce can cross the InfiniBand fabric."),
    Numeric("mtnlg-replica", "2.1", "3d parallel", _mtnlg_replica, "count", "", 0.0,
            why="GPUs per replica = tp x pp.", random_parameters=False),
    MultipleChoice(
        "dgx-pp-second", "2.1", "3d parallel",
        prompt="With TP inside the node, how is the pipeline laid out in MT-NLG?",
        correct="Each node holds a group of consecutive layers; 35 nodes in a row make one replica",
        wrong=("Each GPU of a node holds a different stage",
               "All stages sit in one node and TP spans nodes",
               "Stages are assigned at random to balance the network"),
        why="One stage per node: stage-to-stage sends of activations go over InfiniBand between nodes."),
    # -- 2.2 frameworks -----------------------------------------------------------------------------
    MultipleChoice(
        "mtnlg-stack", "2.2", "frameworks",
        prompt="Which software trained MT-NLG 530B?",
        correct="NVIDIA Megatron-LM for tensor parallelism with Microsoft DeepSpeed for pipeline and data parallelism",
        wrong=("Colossal-AI's 3D tensor parallelism", "JAX with pjit on TPUs", "PyTorch FSDP alone"),
        why="Megatron-DeepSpeed combines the two: Megatron's TP kernels, DeepSpeed's pipeline engine "
            "and ZeRO-1 data parallelism (Smith et al. 2022)."),
    Named("bloom-tp", "2.2", "frameworks",
          prompt="BLOOM ran PP and DP with DeepSpeed. Which library provided its tensor parallelism?",
          options=("DeepSpeed", "Megatron-LM", "Colossal-AI", "Alpa"), answer="Megatron-LM",
          aliases=("megatron",),
          why="BigScience's Megatron-DeepSpeed fork: Megatron-LM's TP, DeepSpeed's PP and ZeRO-1."),
    # -- 2.3 choosing sizes ---------------------------------------------------------------------------
    MultipleChoice(
        "bloom-order", "2.3", "strategy",
        prompt="For a truly large model on 8-GPU NVLink nodes, in which order are the degrees chosen?",
        correct="TP = 8 to use NVLink, then PP until the model fits under 80 GB, then DP for throughput",
        wrong=("DP first, then TP, then PP",
               "PP = 8 inside the node, then TP across nodes",
               "As much DP as possible; TP and PP only for inference"),
        why="Every one of DP, TP and PP cuts memory; the point is to get under the card's 80 GB with "
            "the cheapest communication, and DP scales what is left."),
    Numeric("bloom-160-memory", "2.3", "memory", _bloom_best_memory, "bytes", "GB", 0.02,
            why="A published measurement, with the cost model's term-by-term prediction beside it.",
            random_parameters=False),
    MultipleChoice(
        "llama7b-choice", "2.3", "zero",
        prompt="How does the guide suggest training a 7B model such as LLaMA-7B?",
        correct="Plain DeepSpeed ZeRO data parallelism; 3D parallelism is not needed",
        wrong=("TP = 8 and PP = 4 like BLOOM",
               "Pipeline parallelism over 32 GPUs",
               "It cannot be trained without 3D parallelism"),
        why=f"With ZeRO sharding the {llama7b_states() / 1e9:.1f} GB of model states, a 7B model fits on a node "
            "without model parallelism (the Open-LLaMA recipe)."),
]
