"""Parallel training, run for real on CPU processes (torch; the communicator of ``parlab.comm`` is
passed in explicitly, no global process group). Laid out as the course teaches it: one package
per dimension, beside the shared pieces every strategy is tested against.

    model.py             GPTConfig, TinyGPT, the serial reference trainer
    dataset.py           a grammar-generated character corpus and its deterministic batches
    measure.py           what a run held and when: saved-tensor bytes, per-phase spans, model-state bytes
    grid.py              ProcessGrid: a rank's TP / DP / PP sub-communicators from parlab.layout
    agree.py             what a group's ranks must agree on (one small all-gather), and the
                         trainers' shared checks of steps, lr, batches and a diverging loss
    precision.py         fp32 / fp16 / bf16 formats, dynamic loss scaling, a mixed-precision trainer
    recompute.py         activation recomputation (none / selective / full), stored bytes measured
    compare.py           DP vs TP vs PP measured on the same step (chapter 06)
    data_parallel/       DDP from scratch and its gradient buckets (chapter 03)
    tensor_parallel/     Megatron f / g, column / row linear, vocab-parallel embedding and
                         cross-entropy, sequence parallelism, TensorParallelGPT (chapter 05)
    pipeline_parallel/   stages, the executor of any parlab.schedules schedule, torch's twin (chapter 04)
    zero/                ZeRO stages 0-3: shard plan, units, offload, measured vs modelled (chapter 07)
    context_parallel/    ring attention and DeepSpeed-Ulysses over a split sequence (chapter 13)
    expert_parallel/     MoE: top-k routing with capacity, aux loss, experts over the EP ranks,
                         all-to-all dispatch and combine (chapter 13)
    trainer/             train_3d (DP x TP x PP, ZeRO-1), its prediction, report and checkpoints (chapter 08);
                         train_5d (x CP x EP, the MoE TinyGPT; chapter 13)

``parlab/train/`` is the command line (``python -m parlab.train``, also under torchrun) that
runs ``trainer.train_3d``.
"""

from .context_parallel import (
    CPSetting,
    RingWork,
    ring_attention,
    run_context_parallel,
    ulysses_attention,
)
from .data_parallel import DistributedDataParallel, bucket_plan
from .dataset import VOCAB, VOCAB_SIZE, batches, corpus, decode, encode
from .expert_parallel import (
    ExpertParallelMoE,
    MoE,
    MoEGPT,
    drops_vs_capacity,
    expert_parallel,
    expert_parallel_step,
    finalize_grads,
    train_expert_parallel,
)
from .grid import ProcessGrid
from .measure import MemoryLedger, held_bytes
from .model import (
    GPTConfig,
    TinyGPT,
    count_params,
    lm_loss,
    make_optimizer,
    mean_loss,
    train_reference,
)
from .pipeline_parallel import StageRun, measured_timeline, pipeline_step, train_pipeline
from .precision import DynamicLossScaler, float_format, train_mixed
from .recompute import measure_recompute, recompute_table
from .tensor_parallel import (
    ColumnParallelLinear,
    ParallelAttention,
    ParallelBlock,
    ParallelMLP,
    RowParallelLinear,
    TensorParallelGPT,
    VocabParallelEmbedding,
    allreduce_sequence_parallel_grads,
    copy_to_tensor_model_parallel_region,
    f,
    g,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    load_serial,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
    shard_tensors,
    vocab_parallel_cross_entropy,
)
from .trainer import RankReport, TrainPlan, train_3d, train_5d
from .zero import (
    ShardOptimizer,
    ShardPlan,
    ZeroDataParallel,
    shard_plan,
    zero_memory_rows,
    zero_traffic_rows,
)

__all__ = [
    "VOCAB", "VOCAB_SIZE", "batches", "corpus", "decode", "encode",
    "GPTConfig", "TinyGPT", "count_params", "lm_loss", "make_optimizer", "mean_loss",
    "train_reference", "MemoryLedger", "held_bytes", "ProcessGrid",
    "DynamicLossScaler", "float_format", "train_mixed", "measure_recompute", "recompute_table",
    "DistributedDataParallel", "bucket_plan",
    "ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding",
    "allreduce_sequence_parallel_grads", "copy_to_tensor_model_parallel_region", "f", "g",
    "gather_from_sequence_parallel_region", "gather_from_tensor_model_parallel_region",
    "reduce_from_tensor_model_parallel_region", "reduce_scatter_to_sequence_parallel_region",
    "scatter_to_tensor_model_parallel_region",
    "ParallelAttention", "ParallelBlock", "ParallelMLP", "TensorParallelGPT", "load_serial",
    "shard_tensors", "vocab_parallel_cross_entropy",
    "StageRun", "measured_timeline", "pipeline_step", "train_pipeline",
    "ZeroDataParallel", "ShardOptimizer", "ShardPlan", "shard_plan", "zero_memory_rows",
    "zero_traffic_rows",
    "RankReport", "TrainPlan", "train_3d", "train_5d",
    "CPSetting", "RingWork", "ring_attention", "run_context_parallel", "ulysses_attention",
    "ExpertParallelMoE", "MoE", "MoEGPT", "drops_vs_capacity", "expert_parallel",
    "expert_parallel_step", "finalize_grads", "train_expert_parallel",
]
