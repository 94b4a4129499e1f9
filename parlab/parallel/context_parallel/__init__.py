"""Context parallelism (beyond the guide; chapter 13): one layer's attention over a sequence split
across cp ranks, by ring attention, all-gather attention or DeepSpeed-Ulysses, each equal to serial
attention.

    blocks.py     attention one block at a time: online softmax state, merge, block backward
    sequence.py   a rank's positions: the naive split or the load-balanced causal one
    ring.py       ring attention: K/V blocks round the ring, async sends overlapped with compute
    allgather.py  all-gather attention (Llama 3): K/V of the whole sequence gathered, dK/dV reduce-scattered
    ulysses.py    DeepSpeed-Ulysses: all-to-all from sequence- to head-sharded and back
    run.py        any of them run on cp ranks against serial attention, bytes and work measured
"""

from .allgather import GatherWork, allgather_attention, repeat_kv
from .blocks import SoftmaxState, block_backward, block_scores, block_state, merge
from .ring import RingWork, ring_attention
from .run import CPResult, CPSetting, RankResult, cp_worker, run_context_parallel
from .sequence import shard_sequence, unshard_sequence
from .ulysses import head_to_seq, seq_to_head, ulysses_attention

__all__ = [
    "GatherWork", "allgather_attention", "repeat_kv",
    "SoftmaxState", "block_backward", "block_scores", "block_state", "merge", "RingWork",
    "ring_attention", "CPResult", "CPSetting", "RankResult", "cp_worker", "run_context_parallel",
    "shard_sequence", "unshard_sequence", "head_to_seq", "seq_to_head", "ulysses_attention",
]
