"""Cross-entropy over logits split along the vocabulary, without gathering them
(Megatron-LM, megatron/core/tensor_parallel/cross_entropy.py; Shoeybi et al. 2019, Section 3:
"fuse the output embedding GEMM with the cross entropy loss").

Rank i holds logits z[..., i V/t : (i+1) V/t]. The loss -log softmax(z)[y] = log sum_j e^(z_j - m)
- (z_y - m) needs three reductions over the vocabulary, each an all-reduce of b*s numbers, not
of the b*s*V logits: the max m (for stability), the target's logit z_y - m (found on the one
rank that owns y, zero elsewhere), and the sum of exponentials. The backward needs no
communication: d loss / d z_j = softmax(z)_j - [j = y], on each rank's own columns.
"""

from __future__ import annotations

import torch

from .algebra import all_reduce


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets, comm):
        v_part = logits.shape[-1]
        start = comm.rank * v_part
        z_max = all_reduce(comm, logits.max(dim=-1).values, "max")  # (b, s)
        z = logits - z_max.unsqueeze(-1)  # (b, s, V/t)
        foreign = (targets < start) | (targets >= start + v_part)  # targets another rank owns
        local = (targets - start).masked_fill(foreign, 0)
        z_target = z.gather(-1, local.unsqueeze(-1)).squeeze(-1).masked_fill(foreign, 0.0)
        z_target = all_reduce(comm, z_target)  # (b, s): the target's logit, from its owner
        exp = z.exp()
        sum_exp = all_reduce(comm, exp.sum(dim=-1))  # (b, s)
        ctx.save_for_backward(exp.div_(sum_exp.unsqueeze(-1)), local, foreign)  # softmax
        return sum_exp.log() - z_target  # (b, s) per-token loss

    @staticmethod
    def backward(ctx, grad_loss):
        softmax, local, foreign = ctx.saved_tensors
        grad = softmax.clone()  # d loss / d z_j = softmax_j - [j = target]
        grad.scatter_add_(-1, local.unsqueeze(-1), -(~foreign).to(grad.dtype).unsqueeze(-1))
        return grad * grad_loss.unsqueeze(-1), None, None


def vocab_parallel_cross_entropy(logits_part: torch.Tensor, targets: torch.Tensor,
                                 comm) -> torch.Tensor:
    """Per-token loss (b, s) from this rank's (b, s, V/t) block of the logits; equal to
    ``F.cross_entropy`` on the gathered logits with ``reduction='none'``."""
    return _VocabParallelCrossEntropy.apply(logits_part, targets, comm)
