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
    measure.py          what a run held and when: saved-tensor bytes, per-phase spans
"""

from .bucket import bucket_plan
from .cross_entropy import vocab_parallel_cross_entropy
from .data import VOCAB, VOCAB_SIZE, batches, corpus, decode, encode
from .data_parallel import DistributedDataParallel
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
    "train_pipeline",
]
