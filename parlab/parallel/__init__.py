"""Parallel training, run for real on CPU processes: the tiny GPT every strategy is tested
against, its shipped dataset, and Megatron tensor parallelism (torch; the communicator of
``parlab.comm`` is passed in explicitly, no global process group).

    model.py            GPTConfig, TinyGPT, the serial reference trainer
    data.py             a grammar-generated character corpus and its deterministic batches
    tensor_algebra.py   column- / row-parallel Y = XA on plain arrays, forward and backward
    tensor.py           f / g and the other region operators, ColumnParallelLinear,
                        RowParallelLinear, VocabParallelEmbedding, sequence-parallel grads
    cross_entropy.py    the vocabulary-parallel cross-entropy (no gathered logits)
    tensor_model.py     ParallelAttention, ParallelMLP, ParallelBlock, TensorParallelGPT
    bucket.py           the gradient-bucket plan (pure): parameters last to first, closed at the cap
    data_parallel.py    DistributedDataParallel from scratch: broadcast, hooks, buckets, no_sync
    pipeline_stage.py   the layer split of TinyGPT into p stages / p*v chunks
    pipeline.py         the executor of any synchronous parlab.schedules schedule
    pipeline_torch.py   the same step through torch.distributed.pipelining (tests, bench)
    measure.py          what a run held and when: saved-tensor bytes, per-phase spans, model-state bytes
    zero_shard.py       the ZeRO partition of a flat vector over the DP ranks (pure), padded
    offload.py          one shard's fp32 master + AdamW, on the device or offloaded to the host
    zero.py             ZeroDataParallel: ZeRO stages 0-3, mixed precision, offload, measured vs modelled
    recompute.py        activation recomputation (none / selective / full), stored bytes measured
    precision.py        fp32 / fp16 / bf16 formats, dynamic loss scaling, a mixed-precision trainer
    grid.py             ProcessGrid: a rank's TP / DP / PP sub-communicators from parlab.layout
    stage_tp.py         pipeline stages made of tensor-parallel blocks (for 3D)
    train.py            train_3d: DP x TP x PP (optionally ZeRO-1) with any pipeline schedule
    train_zero.py       ZeRO-1 over the DP group at the step level (the 3D trainer's)
    train_predict.py    the cost model's prediction of each 3D rank's bytes held and sent
    train_report.py     the measured-vs-predicted table and the measured timeline of a 3D run
    checkpoint.py       sharded torch.distributed.checkpoint save / resume / re-shard
    compare.py          DP vs TP vs PP measured on the same step (chapter 06)
"""

from .bucket import bucket_plan
from .cross_entropy import vocab_parallel_cross_entropy
from .data import VOCAB, VOCAB_SIZE, batches, corpus, decode, encode
from .data_parallel import DistributedDataParallel
from .grid import ProcessGrid
from .model import (
    GPTConfig,
    TinyGPT,
    count_params,
    lm_loss,
    make_optimizer,
    mean_loss,
    train_reference,
)
from .pipeline import StageRun, measured_timeline, pipeline_step, train_pipeline
from .tensor import (
    ColumnParallelLinear,
    RowParallelLinear,
    VocabParallelEmbedding,
    allreduce_sequence_parallel_grads,
    copy_to_tensor_model_parallel_region,
    f,
    g,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
)
from .tensor_model import (
    ParallelAttention,
    ParallelBlock,
    ParallelMLP,
    TensorParallelGPT,
    load_serial,
    shard_tensors,
)

__all__ = [
    "VOCAB", "VOCAB_SIZE", "batches", "corpus", "decode", "encode",
    "GPTConfig", "TinyGPT", "count_params", "lm_loss", "make_optimizer", "mean_loss",
    "train_reference",
    "ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding",
    "allreduce_sequence_parallel_grads", "copy_to_tensor_model_parallel_region", "f", "g",
    "gather_from_sequence_parallel_region", "gather_from_tensor_model_parallel_region",
    "reduce_from_tensor_model_parallel_region", "reduce_scatter_to_sequence_parallel_region",
    "scatter_to_tensor_model_parallel_region",
    "ParallelAttention", "ParallelBlock", "ParallelMLP", "TensorParallelGPT", "load_serial",
    "shard_tensors", "vocab_parallel_cross_entropy",
    "DistributedDataParallel", "StageRun", "bucket_plan", "measured_timeline", "pipeline_step",
    "train_pipeline", "ProcessGrid",
    "ZeroDataParallel", "ShardOptimizer", "ShardPlan", "shard_plan", "zero_memory_rows",
    "zero_traffic_rows", "MemoryLedger", "held_bytes",
]
from .measure import MemoryLedger, held_bytes  # noqa: E402
from .offload import ShardOptimizer  # noqa: E402
from .train import RankReport, TrainPlan, train_3d  # noqa: E402  (3D trainer; checkpoint.py)
from .zero import ZeroDataParallel  # noqa: E402
from .zero_measure import zero_memory_rows, zero_traffic_rows  # noqa: E402
from .zero_shard import ShardPlan, shard_plan  # noqa: E402

__all__ += ["RankReport", "TrainPlan", "train_3d"]
from .precision import DynamicLossScaler, float_format, train_mixed  # noqa: E402  (chapter 09)
from .recompute import measure_recompute, recompute_table  # noqa: E402  (chapter 09)

__all__ += ["DynamicLossScaler", "float_format", "train_mixed", "measure_recompute", "recompute_table"]
