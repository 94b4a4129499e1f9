"""Context parallelism (beyond the guide; chapter 13): one layer's attention over a sequence split
across cp ranks, by ring attention or DeepSpeed-Ulysses, each equal to serial attention.

    blocks.py     attention one block at a time: online softmax state, merge, block backward
    sequence.py   a rank's positions: the naive split or the load-balanced causal one
    ring.py       ring attention: K/V blocks round the ring, async sends overlapped with compute
    ulysses.py    DeepSpeed-Ulysses: all-to-all from sequence- to head-sharded and back
    run.py        either one run on cp ranks against serial attention, bytes and work measured
"""

from .blocks import SoftmaxState, block_backward, block_scores, block_state, merge
from .ring import RingWork, ring_attention
from .run import CPResult, CPSetting, RankResult, cp_worker, run_context_parallel
from .sequence import shard_sequence, unshard_sequence
from .ulysses import head_to_seq, seq_to_head, ulysses_attention

__all__ = [
    "SoftmaxState", "block_backward", "block_scores", "block_state", "merge", "RingWork",
    "ring_attention", "CPResult", "CPSetting", "RankResult", "cp_worker", "run_context_parallel",
    "shard_sequence", "unshard_sequence", "head_to_seq", "seq_to_head", "ulysses_attention",
]
