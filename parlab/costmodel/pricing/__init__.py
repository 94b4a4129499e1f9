"""Pricing of one layer and one collective: FLOPs, memory terms, alpha-beta and trees, and the
TP / CP / EP terms of one transformer layer. Imports only ``specs``.

    attention_terms.py  one layer's attention priced: GQA/MQA projections, head_dim, windowed scores,
                        its weights and K/V heads under TP, the line explain prints
    flops.py            6ND, Megatron's FLOPs per iteration, training days
    layer_flops.py      one layer's and one step's matmul FLOPs (model and hardware FLOPs)
    params.py           parameters one GPU holds under TP and PP
    memory.py           model states per parameter, activations per layer (Korthikanti et al. 2022)
    fp8.py              FP8 training: the FLOPs in FP8, the FP8 weight copies, FP8 all-gather bytes
    alphabeta.py        alpha-beta costs of ring, tree and direct collectives (Thakur et al. 2005)
    trees.py            NCCL's double binary tree
    collectives.py      a collective's time on a cluster's links
    ring_vs_tree.py     where the tree beats the ring
    layer_collective.py one collective call of a layer (TP, EP) and the elements it sends
    tensor_parallel/    Megatron 1D and Colossal-AI 2D/2.5D/3D: a layer's collectives and cost
    cp_split.py         what CP splits: the heads, each rank's chunks (balanced causal split), its work
    cp_overlap.py       whether CP's sends hide behind attention: the ring's block, the all-gather
    context_parallel.py ring, all-gather and Ulysses attention: bytes and memory of one layer
    expert_parallel/    one MoE layer under EP: all-to-alls, expert memory, FLOPs
    moe_layer.py        an MoE model's layers: parameters and FLOPs, dense and MoE layers apart
    inference.py        one decode step's latency (guide 4.1), the KV cache (GQA, windows)
"""
