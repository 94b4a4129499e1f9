"""TinyGPT split over a tensor-parallel group: Megatron's MLP and attention, with or without
sequence parallelism, built from a serial TinyGPT's weights by slicing them.

Each block does, without SP (Shoeybi et al. 2019, Section 3, Figure 4): LayerNorm on the full
(b, s, h), then ``f``, a column-parallel QKV (rank i keeps heads [i a/t, (i+1) a/t)), attention
on its heads, a row-parallel output projection, ``g`` (all-reduce); the same for the MLP
(column-parallel h -> f, GeLU, row-parallel f -> h, all-reduce). With SP (Korthikanti et al.
2022, Figure 5) the LayerNorms and residual adds see (b, s/t, h) and each ``f``/``g`` pair is an
all-gather / reduce-scatter along the sequence. Parameters carry the serial model's names, so
``shard_tensors`` slices any serial tensor (weights, gradients) to match a rank's parameter.

    tp_model = TensorParallelGPT.from_serial(TinyGPT(cfg), comm, sequence_parallel=True)
    loss = tp_model(x, y)            # the serial loss, on every TP rank
    loss.backward()
    allreduce_sequence_parallel_grads(tp_model, comm)    # only with SP
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..model import GPTConfig, TinyGPT, causal_attention, check_tokens, merge_heads, split_heads
from .cross_entropy import vocab_parallel_cross_entropy
from .layers import (
    ColumnParallelLinear,
    RowParallelLinear,
    VocabParallelEmbedding,
    _mark,
    shard_strided,
)
from .mappings import check_divides, gather_from_tensor_model_parallel_region


def _layer_norm(hidden: int, sequence_parallel: bool) -> nn.LayerNorm:
    ln = nn.LayerNorm(hidden)
    for p in ln.parameters():
        _mark(p, None, sequence_parallel=sequence_parallel)
    return ln


class ParallelAttention(nn.Module):
    """Causal self-attention with the heads split over the TP ranks: a column-parallel fused
    QKV (stride 3: rank i keeps its heads' q, k and v), attention on a/t heads, a row-parallel
    output projection: one all-reduce forward, one backward (Shoeybi et al. 2019, Figure 3b)."""

    def __init__(self, cfg: GPTConfig, comm, sequence_parallel: bool = False):
        super().__init__()
        t = check_divides(comm, n_head=cfg.n_head, hidden=cfg.hidden)
        self.local_heads = cfg.n_head // t
        h = cfg.hidden
        self.qkv = ColumnParallelLinear(h, 3 * h, comm, sequence_parallel=sequence_parallel, stride=3)
        self.proj = RowParallelLinear(h, h, comm, sequence_parallel=sequence_parallel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.qkv(x)  # (b, s, h) @ (h, 3h/t) -> (b, s, 3h/t)
        q, k, v = split_heads(qkv, self.local_heads)  # (b, a/t, s, d) each
        y = merge_heads(causal_attention(q, k, v))  # (b, s, h/t)
        return self.proj(y)  # (b, s, h/t) @ (h/t, h) -> (b, s, h), summed over ranks


class ParallelMLP(nn.Module):
    """Column-parallel h -> f, GeLU on each column block, row-parallel f -> h: no communication
    between the two, one all-reduce forward and one backward (Shoeybi et al. 2019, Figure 3a)."""

    def __init__(self, cfg: GPTConfig, comm, sequence_parallel: bool = False):
        super().__init__()
        check_divides(comm, ffn=cfg.ffn)
        self.fc = ColumnParallelLinear(cfg.hidden, cfg.ffn, comm, sequence_parallel=sequence_parallel)
        self.proj = RowParallelLinear(cfg.ffn, cfg.hidden, comm, sequence_parallel=sequence_parallel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.gelu(self.fc(x))  # (b, s, h) @ (h, f/t) -> (b, s, f/t)
        return self.proj(y)  # (b, s, f/t) @ (f/t, h) -> (b, s, h), summed over ranks


class ParallelBlock(nn.Module):
    """The pre-LN block of ``model.Block`` with parallel attention and MLP."""

    def __init__(self, cfg: GPTConfig, comm, sequence_parallel: bool = False):
        super().__init__()
        self.ln_1 = _layer_norm(cfg.hidden, sequence_parallel)
        self.attn = ParallelAttention(cfg, comm, sequence_parallel)
        self.ln_2 = _layer_norm(cfg.hidden, sequence_parallel)
        self.mlp = ParallelMLP(cfg, comm, sequence_parallel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (b, s, h), or (b, s/t, h) with SP
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TensorParallelGPT(nn.Module):
    """TinyGPT on one rank of a TP group of t = comm.world_size ranks: vocabulary-parallel
    token embedding (and LM head, tied or not), replicated position embedding and LayerNorms,
    parallel blocks. ``forward`` returns what TinyGPT returns on every rank: the logits
    (all-gathered along the vocabulary, (b, s, V)) or the loss (the vocabulary-parallel
    cross-entropy, which gathers no logits). Its weights are the serial TinyGPT(config)'s,
    sliced (``from_serial`` takes them from a given model)."""

    def __init__(self, config: GPTConfig, comm, sequence_parallel: bool = False):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        if config.dropout:
            raise ValueError(f"TensorParallelGPT needs GPTConfig.dropout=0, got {config.dropout}: "
                             f"dropout masks consistent across TP ranks need Megatron's RNG "
                             f"tracker, which parlab does not implement")
        self.t = check_divides(comm, hidden=config.hidden, n_head=config.n_head, ffn=config.ffn,
                               vocab_size=config.vocab_size)
        self.config, self.comm, self.sequence_parallel = config, comm, bool(sequence_parallel)
        sp, h = self.sequence_parallel, config.hidden
        self.wte = VocabParallelEmbedding(config.vocab_size, h, comm, sequence_parallel=sp)
        self.wpe = nn.Embedding(config.seq_len, h)
        _mark(self.wpe.weight, None, sequence_parallel=sp)
        self.blocks = nn.ModuleList(ParallelBlock(config, comm, sp) for _ in range(config.n_layer))
        self.ln_f = _layer_norm(h, sp)
        # the LM head is column-parallel over the vocabulary; its input is all-gathered along
        # the sequence under SP (copied, f, without); its logits stay split (b, s, V/t)
        self.lm_head = ColumnParallelLinear(h, config.vocab_size, comm, gather_output=False,
                                            bias=False, sequence_parallel=sp)
        if config.tie_embeddings:
            self.lm_head.weight = self.wte.weight  # the same (V/t, h) block of rows
        load_serial(self, TinyGPT(config))

    @classmethod
    def from_serial(cls, serial: TinyGPT, comm, sequence_parallel: bool = False) -> TensorParallelGPT:
        """The TP model holding ``serial``'s current weights, sliced for this rank."""
        if not isinstance(serial, TinyGPT):
            raise TypeError(f"serial must be a TinyGPT, got {type(serial).__name__}")
        model = cls(serial.config, comm, sequence_parallel)
        load_serial(model, serial)
        return model

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        check_tokens(idx, self.config, targets)
        s = idx.shape[1]
        pos = torch.arange(s, device=idx.device)
        if self.sequence_parallel:
            if s % self.t:
                raise ValueError(f"sequence parallelism splits the sequence over tp={self.t} ranks: "
                                 f"the sequence length {s} must be divisible by it")
            pos = pos.chunk(self.t)[self.comm.rank]  # this rank's positions
        x = self.wte(idx) + self.wpe(pos)  # (b, s, h), or (b, s/t, h) with SP
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (b, s, h) @ (h, V/t) -> (b, s, V/t)
        if targets is None:
            return gather_from_tensor_model_parallel_region(logits, self.comm)  # (b, s, V)
        return vocab_parallel_cross_entropy(logits, targets, self.comm).mean()


def shard_tensors(model: nn.Module, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """For each parameter of the TP ``model``, this rank's slice of the serial tensor of the same
    name in ``tensors`` (a state dict, or gradients): split along the parameter's
    ``partition_dim`` in ``partition_stride`` groups, or whole if it is replicated."""
    comm = model.comm
    out = {}
    for name, p in model.named_parameters():
        if name not in tensors:
            raise ValueError(f"no serial tensor named {name!r} to slice for the TP model")
        full, dim = tensors[name], getattr(p, "partition_dim", None)
        part = full if dim is None else shard_strided(full, comm.rank, comm.world_size, dim,
                                                      p.partition_stride)
        if part.shape != p.shape:
            raise ValueError(f"{name}: the serial tensor {tuple(full.shape)} split tp="
                             f"{comm.world_size} ways gives {tuple(part.shape)}, but the TP "
                             f"parameter is {tuple(p.shape)} (a model of another shape or tp?)")
        out[name] = part
    return out


@torch.no_grad()
def load_serial(model: nn.Module, serial: nn.Module) -> None:
    """Copy ``serial``'s weights, sliced for this rank, into the TP ``model``."""
    for name, part in shard_tensors(model, dict(serial.state_dict())).items():
        model.get_parameter(name).copy_(part)

