"""Drill questions on guide part 1, sections 1.1-1.9: the two walls, communication, DP, PP, TP, 3D."""

from __future__ import annotations

from parlab.costmodel import (
    SECONDS_PER_YEAR,
    alphabeta,
    bus_factor,
    get_model,
    implied_utilisation,
    model_state_memory,
)
from parlab.costmodel.answers.walls import compute_wall
from parlab.course.guide import CLAIMS

from .questions import MultipleChoice, Named, Numeric, Posed

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "broadcast", "reduce", "identity", "split")


def _gpt3_fp32_states(_rng) -> Posed:
    n = get_model("gpt3-175b").num_params()
    s = model_state_memory(n, "fp32", "adam")
    return Posed(f"GPT-3 has {n:,} parameters. Trained in plain fp32 with Adam, how many bytes do its "
                 "model states (weights, gradients, Adam's two moments) take? Answer in TB.",
                 s.total, f"parlab: {s.bytes_per_param:.0f} B/param x {n:.4g} = {s.total / 1e12:.3g} TB "
                 "(4 weights + 4 gradients + 8 Adam).")


def _gpt3_years(_rng) -> Posed:
    w = compute_wall("gpt3-175b", 300e9, "a100-80gb", 1, 0.5)
    years = CLAIMS["gpt3-years-a100"].value
    implied = implied_utilisation(w.flops, years * SECONDS_PER_YEAR, 1, "a100-80gb")
    return Posed("How many years would one A100 (312 TFLOP/s bf16 peak) need to train GPT-3 175B on "
                 "300B tokens at 50% of peak, by C = 6ND?", w.seconds,
                 f"parlab: 6 x {w.model.num_params():.4g} x 3e11 = {w.flops:.3g} FLOPs / "
                 f"(312e12 x 0.5) = {w.days / 365.25:.3g} years. The guide's {years:g} years implies "
                 f"a utilisation of {implied:.0%} of the bf16 peak.",
                 {"model": "gpt3-175b", "tokens": 300e9, "gpu": "a100-80gb", "utilisation": 0.5})


def _ring_volume(_rng) -> Posed:
    steps, volume, _ = alphabeta.shape("all_reduce", "ring", 8, 1.0)
    return Posed("In a ring all-reduce of a buffer of S bytes among 8 ranks, how many times S does each "
                 "rank send? (A ratio: e.g. 1.75 means 1.75 S.)", volume,
                 f"parlab alphabeta: 2(p-1)/p = {volume:g} S in {steps:g} steps: a reduce-scatter "
                 "then an all-gather, each moving (p-1)/p of the buffer.")


def _busbw(_rng) -> Posed:
    f = bus_factor("all_reduce", 16)
    return Posed("nccl-tests reports bus bandwidth = algorithm bandwidth x a factor. What is the factor "
                 "for an all-reduce on 16 ranks?", f, f"2(n-1)/n = {f:g} (nccl-tests PERFORMANCE.md).")


QUESTIONS = [
    # -- 1.1 the two walls ------------------------------------------------------------------
    MultipleChoice(
        "walls-two", "1.1", "memory",
        prompt="Which two problems make training a 175B-parameter model on one GPU impossible?",
        correct="Its model states do not fit in GPU memory, and the FLOPs would take decades on one card",
        wrong=("The dataset does not fit on the GPU's disk, and the tokenizer is too slow",
               "The weights fit, but the gradients overflow fp16",
               "The GPU cannot run attention for sequences longer than 2048"),
        why="The memory wall: 175B parameters need terabytes of weights, gradients and optimizer "
            "states against 80 GB per card. The compute wall: about 6ND FLOPs, decades on one card."),
    Numeric("gpt3-fp32-states", "1.1", "memory", _gpt3_fp32_states, "bytes", "TB", 0.02,
            why=f"The guide's {CLAIMS['gpt3-states-fp32'].value / 1e12:g} TB is 16 bytes per parameter.",
            random_parameters=False),
    MultipleChoice(
        "adam-share", "1.1", "memory",
        prompt="In fp32 training with Adam, which part of the model states is largest?",
        correct="Adam's momentum and variance: twice the weights",
        wrong=("The weights: optimizer states are small bookkeeping",
               "The gradients: they are kept for every micro-batch",
               "All three are the same size"),
        why="Adam keeps two fp32 numbers per parameter, 8 bytes against 4 for the weights and 4 for "
            "the gradients (ZeRO paper, Sec. 3.1)."),
    Numeric("gpt3-years", "1.1", "compute", _gpt3_years, "seconds", "years", 0.02,
            why="Training compute is about 6 FLOPs per parameter per token (Kaplan et al. 2020).",
            random_parameters=False),
    # -- 1.2 point to point -----------------------------------------------------------------
    MultipleChoice(
        "p2p-what", "1.2", "communication",
        prompt="What is point-to-point communication?",
        correct="One process sends a message and one specific process receives it (a send/recv pair)",
        wrong=("Every process sends its data to every other process",
               "One process writes to shared memory that all processes poll",
               "The same as a broadcast with two ranks, always routed through rank 0"),
        why="A send matched by a recv between exactly two ranks; collectives are built from such pairs."),
    MultipleChoice(
        "p2p-deadlock", "1.2", "communication",
        prompt="Two ranks each call a blocking send to the other, then a blocking recv, with a large "
               "message that the transport cannot buffer. What happens?",
        correct="They deadlock: each send waits for a recv that the other rank never reaches",
        wrong=("Both messages are delivered; blocking calls are always buffered",
               "The runtime reorders the calls so that one recv runs first",
               "Rank 0 wins and rank 1's send is dropped"),
        why="Order the calls (even ranks send first, odd ranks receive first) or use non-blocking "
            "isend/irecv or a combined sendrecv."),
    Named("p2p-user", "1.2", "communication",
          prompt="Which parallelism moves its data mostly with point-to-point sends?",
          options=("data parallel", "tensor parallel", "pipeline parallel", "ZeRO-3"),
          answer="pipeline parallel", aliases=("pipeline", "pp"),
          why="Pipeline stages pass activations forward and gradients backward to their neighbour "
              "only; DP, TP and ZeRO use collectives."),
    # -- 1.3 collectives --------------------------------------------------------------------
    MultipleChoice(
        "allreduce-result", "1.3", "communication",
        prompt="After an all-reduce (sum) of tensors t0..t3 on ranks 0-3, what does each rank hold?",
        correct="Every rank holds t0 + t1 + t2 + t3",
        wrong=("Only rank 0 holds the sum; the others keep their own tensor",
               "Rank i holds the i-th quarter of the sum",
               "Every rank holds all four tensors side by side"),
        why="Reduce leaves the sum at one root; all-reduce leaves it everywhere; reduce-scatter leaves "
            "a slice of it on each rank; all-gather concatenates."),
    Named("rs-plus-ag", "1.3", "communication",
          prompt="A ring all-reduce is two collectives one after the other: a reduce-scatter followed "
                 "by which?",
          options=COLLECTIVES, answer="all-gather", aliases=("allgather",),
          why="Reduce-scatter leaves each rank one summed slice; all-gather then hands every slice to "
              "every rank. ZeRO uses the two halves separately."),
    Numeric("ring-volume", "1.3", "communication", _ring_volume, "ratio", "", 0.01,
            why="Per-rank traffic of a ring all-reduce hardly grows with the rank count: it tends "
                "to 2S, which is why the guide's 'collectives are slow' is too strong.",
            random_parameters=False),
    Numeric("busbw-factor", "1.3", "communication", _busbw, "ratio", "", 0.01,
            why="The factor makes the bus bandwidth comparable with the link speed for any n.",
            random_parameters=False),
    MultipleChoice(
        "collective-cost", "1.3", "communication",
        prompt="The guide calls collectives slow and costly. What does the alpha-beta model say about "
               "a ring all-reduce of a large buffer as the rank count n grows?",
        correct="Each rank's traffic stays under 2 x the buffer; only the latency term grows, as 2(n-1) alpha",
        wrong=("Its time grows linearly with n because rank 0 receives everything",
               "Its time falls as 1/n because every rank sends less",
               "It costs the same as n point-to-point sends of the whole buffer"),
        why="Ring all-reduce is bandwidth-optimal (Patarasuk & Yuan 2009): 2(n-1)/n x S bytes per rank. "
            "Naive reduce-then-broadcast through one root is the one that grows with n."),
    # -- 1.4 data parallel ------------------------------------------------------------------
    MultipleChoice(
        "dp-same", "1.4", "data parallel",
        prompt="Data parallelism keeps identical model replicas on every GPU. What guarantees it?",
        correct="The same initial weights (broadcast from rank 0) and the same averaged gradients each step",
        wrong=("Every GPU sees the same data each step",
               "The weights are all-reduced after every optimizer step",
               "Each GPU uses a different random seed, and the differences average out"),
        why="Same start + same update = same weights: DDP broadcasts rank 0's parameters at "
            "construction and all-reduces the gradients before the optimizer step."),
    Named("dp-collective", "1.4", "data parallel",
          prompt="Which collective does plain data parallelism run on the gradients every step?",
          options=COLLECTIVES, answer="all-reduce", aliases=("allreduce", "all reduce"),
          why="The gradient all-reduce (an average) sits between the backward pass and the optimizer step."),
    MultipleChoice(
        "dp-when", "1.4", "data parallel",
        prompt="When, in a data-parallel step, are the gradients synchronised?",
        correct="After the backward pass produces them and before the optimizer updates the weights",
        wrong=("Before the forward pass, so that every replica starts equal",
               "After the optimizer step, by averaging the updated weights",
               "Only at the end of each epoch"),
        why="DDP hooks into autograd: as gradients are produced in backward they are all-reduced, and "
            "optimizer.step() waits for them."),
    # -- 1.5 faster DP ----------------------------------------------------------------------
    MultipleChoice(
        "buckets-why", "1.5", "data parallel",
        prompt="Why does DDP pack gradients into buckets (about 25 MB) rather than all-reducing each "
               "tensor on its own?",
        correct="Each collective pays a fixed latency; a few large messages use the bandwidth better than many small ones",
        wrong=("Buckets compress the gradients to half their size",
               "NCCL cannot all-reduce tensors smaller than 25 MB",
               "Buckets let the optimizer run on part of the model before backward ends"),
        why="Alpha-beta: k messages cost k alpha + S beta; one bucket costs alpha + S beta. Too large a "
            "bucket delays the first all-reduce and shrinks the overlap, hence a middle size."),
    MultipleChoice(
        "overlap-how", "1.5", "data parallel",
        prompt="How does DDP overlap communication with computation?",
        correct="It all-reduces a bucket as soon as all its gradients exist, while backward computes earlier layers",
        wrong=("It runs the forward pass of the next step during the all-reduce",
               "It all-reduces the activations during the forward pass",
               "It delays the all-reduce to the optimizer step and runs both at once"),
        why="Gradients appear last layer first; buckets follow that order, so the reduction of late "
            "layers hides behind the backward of early ones (Li et al. 2020, PyTorch DDP)."),
    MultipleChoice(
        "no-sync", "1.5", "data parallel",
        prompt="With gradient accumulation over 4 micro-batches and DDP's no_sync() on the first 3, how "
               "many gradient all-reduces run per optimizer step?",
        correct="One, after the last micro-batch",
        wrong=("Four, one per micro-batch", "Three, one per no_sync micro-batch",
               "None: no_sync skips gradient communication entirely"),
        why="no_sync accumulates gradients locally; the last micro-batch's backward runs the one "
            "all-reduce of the summed gradients, cutting the traffic by 4."),
    # -- 1.6 pipeline -----------------------------------------------------------------------
    MultipleChoice(
        "pp-what", "1.6", "pipeline",
        prompt="What does pipeline parallelism split across GPUs?",
        correct="The layers: each GPU holds a contiguous group of layers (a stage)",
        wrong=("Each weight matrix, by rows or columns",
               "The batch: each GPU gets different sequences",
               "The optimizer states only"),
        why="Inter-layer split: stage i runs layers of block i and passes activations to stage i+1."),
    MultipleChoice(
        "pp-memory", "1.6", "pipeline",
        prompt="GPipe and 1F1B (PipeDream-Flush) have the same bubble. Why is 1F1B preferred?",
        correct="It holds at most p micro-batches of activations per stage instead of all m",
        wrong=("It has no bubble at all",
               "It needs no flush, so weights are never stale",
               "It sends fewer bytes between stages"),
        why="1F1B starts backwards as soon as possible, so stage r keeps min(p - r, m) micro-batches; "
            "GPipe keeps all m until its backward phase. Both have bubble (p-1)/(m+p-1)."),
    MultipleChoice(
        "bubble-what", "1.6", "pipeline",
        prompt="What shrinks the pipeline bubble fraction (p-1)/(m+p-1) of GPipe and 1F1B?",
        correct="More micro-batches per step (larger m), or interleaved stages",
        wrong=("More pipeline stages (larger p)",
               "Larger micro-batches with the same m",
               "Faster links between stages"),
        why="The fill and drain cost p-1 micro-batch slots; spread them over more micro-batches, or "
            "cut each slot by v with interleaving (Narayanan et al. 2021)."),
    # -- 1.7 tensor parallel ----------------------------------------------------------------
    Named("row-g-forward", "1.7", "tensor parallel",
          prompt="Row-parallel matmul Y = XA (A split by rows, X by columns): each rank computes "
                 "X_i A_i. Which collective does the forward pass need to form Y?",
          options=COLLECTIVES, answer="all-reduce", aliases=("allreduce",),
          why="Y = X_1 A_1 + X_2 A_2: partial sums, added by an all-reduce (Megatron's g). Its backward "
              "is the identity."),
    Named("column-f-backward", "1.7", "tensor parallel",
          prompt="Column-parallel matmul (A split by columns, X replicated): the input operator f is "
                 "the identity in the forward pass. Which collective is it in the backward pass?",
          options=COLLECTIVES, answer="all-reduce", aliases=("allreduce",),
          why="Every rank's X A_i depends on the whole X, so dL/dX is the sum of each rank's "
              "contribution: an all-reduce (Megatron's f)."),
    Named("column-output", "1.7", "tensor parallel",
          prompt="After a column-parallel matmul each rank holds Y_i, a block of columns of Y. To "
                 "rebuild the whole Y on every rank, which collective runs?",
          options=COLLECTIVES, answer="all-gather", aliases=("allgather",),
          why="Y = [Y_1, Y_2] is a concatenation: all-gather. Megatron avoids it in the MLP by "
              "feeding Y_i straight into a row-parallel matmul."),
    MultipleChoice(
        "megatron-mlp", "1.7", "tensor parallel",
        prompt="Megatron-LM splits the MLP's first matrix by columns and its second by rows. Why that order?",
        correct="GeLU acts elementwise on each rank's columns, so no communication is needed until the row-parallel output",
        wrong=("Row parallelism first would need less memory",
               "Columns first lets the two matmuls run at the same time",
               "It makes the MLP's backward pass need no communication"),
        why="Column-split first keeps the nonlinearity local (GeLU(X A_1) on each rank); the row-split "
            "second matrix takes those blocks directly and one all-reduce ends the MLP "
            "(Shoeybi et al. 2019, Sec. 3)."),
    # -- 1.8 comparing ----------------------------------------------------------------------
    Named("only-tp-acts", "1.8", "tensor parallel",
          prompt="Which parallelism is the only one of DP, TP and PP that divides the activations "
                 "inside a single layer?",
          options=("data parallel", "tensor parallel", "pipeline parallel"),
          answer="tensor parallel", aliases=("tp", "tensor", "model parallel"),
          why="PP divides the layers, DP the batch; only TP splits each layer's matrices and so its "
              "intermediate activations (with sequence parallelism, the rest too)."),
    MultipleChoice(
        "dp-comm-grows", "1.8", "data parallel",
        prompt="In data parallelism, what does the gradient traffic per GPU grow with?",
        correct="The model size: each step all-reduces one gradient per parameter",
        wrong=("The number of GPUs: each GPU talks to all others",
               "The batch size: more samples, more gradients",
               "The sequence length"),
        why="Per step a ring all-reduce moves about 2 x (bytes of gradients) per GPU, whatever the "
            "batch; compute per GPU stays constant as GPUs are added."),
    MultipleChoice(
        "comm-ranking", "1.8", "communication",
        prompt="Rank DP, TP and PP by communication volume per step, least first (typical large model).",
        correct="PP < DP < TP",
        wrong=("TP < PP < DP", "DP < PP < TP", "DP < TP < PP"),
        why="PP sends only the activations at stage boundaries; DP all-reduces the gradients once per "
            "step; TP all-reduces activations several times in every layer, forward and backward."),
    MultipleChoice(
        "pp-acts", "1.8", "pipeline",
        prompt="Does pipeline parallelism reduce the activation memory of each layer?",
        correct="No: a stage holds fewer layers, but each layer's activations are as large as before",
        wrong=("Yes: each stage stores 1/p of every layer's activations",
               "Yes: activations are sent to the next stage and freed",
               "No: PP stores every stage's activations on the first GPU"),
        why="A stage keeps the full per-layer activations of every micro-batch in flight; only TP (or "
            "sequence parallelism, or recompute) shrinks the per-layer term."),
    # -- 1.9 3D -----------------------------------------------------------------------------
    MultipleChoice(
        "3d-what", "1.9", "3d parallel",
        prompt="What is 3D parallelism?",
        correct="Data, tensor and pipeline parallelism at once: GPUs = dp x tp x pp",
        wrong=("Tensor parallelism on a 3D cube of GPUs (Colossal-AI 3D)",
               "Three copies of the model trained at once",
               "Splitting the batch, the sequence and the hidden dimension"),
        why="Each GPU has a coordinate (dp, pp, tp) in the rank grid; Colossal-AI's '3D' is a way to "
            "split one matrix, a different idea."),
    MultipleChoice(
        "3d-order", "1.9", "3d parallel",
        prompt="In Megatron's rank order, which dimension gets consecutive ranks (so it stays inside a node)?",
        correct="Tensor parallelism",
        wrong=("Data parallelism", "Pipeline parallelism", "None: ranks are assigned at random"),
        why="TP talks most, so its groups take adjacent ranks on one NVLink node; then DP, then PP "
            "(parlab.costmodel.specs.cluster.ORDER)."),
]
