"""TinyGPT: a GPT-2-style decoder small enough that one training step on 2 CPU cores takes
milliseconds, the serial reference every parallel strategy in ``parlab.parallel`` is tested against.

Token + learned position embedding, ``n_layer`` pre-LN blocks (causal self-attention, then an
MLP with GeLU, each added to the residual stream), a final LayerNorm and the LM head (tied to the
token embedding or not), cross-entropy loss: the GPT-2 architecture (Radford et al. 2019,
Section 2.3) at toy size. Shapes: b batch, s sequence, h hidden, a heads, d = h/a, f = ffn
hidden, V vocabulary. Weights come from ``torch.Generator().manual_seed(config.seed)`` in a
fixed order, so every process of every run builds the same model.

    cfg = GPTConfig()                      # 2 layers, h = 64, 4 heads, s = 32, V = 32
    model = TinyGPT(cfg)
    loss = model(x, y)                     # x, y: (b, s) int64; model(x) gives the logits
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from parlab.costmodel.specs._check import boolean, non_negative, positive

from .dataset import VOCAB_SIZE

INIT_STD = 0.02  # GPT-2's initialisation (Radford et al. 2019, Section 2.3)
OPTIMIZERS = ("adamw", "sgd")


@dataclass(frozen=True)
class GPTConfig:
    """The shape of a TinyGPT. ``ffn_mult`` * ``hidden`` is the MLP's inner width (GPT: 4);
    ``dropout`` (0 by default) applies to the embeddings, attention probabilities and the
    residual branches; ``seed`` fixes the initial weights."""

    vocab_size: int = VOCAB_SIZE
    seq_len: int = 32
    n_layer: int = 2
    n_head: int = 4
    hidden: int = 64
    ffn_mult: int = 4
    dropout: float = 0.0
    tie_embeddings: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "seq_len", "n_layer", "n_head", "hidden", "ffn_mult"):
            positive(f"GPTConfig.{name}", getattr(self, name), integer=True)
        if self.hidden % self.n_head:
            raise ValueError(f"GPTConfig.hidden={self.hidden} must be divisible by "
                             f"GPTConfig.n_head={self.n_head} (each head gets hidden / n_head dims)")
        non_negative("GPTConfig.dropout", self.dropout)
        if not self.dropout < 1:
            raise ValueError(f"GPTConfig.dropout must be in [0, 1), got {self.dropout!r}")
        boolean("GPTConfig.tie_embeddings", self.tie_embeddings)
        non_negative("GPTConfig.seed", self.seed, integer=True)

    @property
    def ffn(self) -> int:
        """f, the MLP's inner width."""
        return self.ffn_mult * self.hidden

    @property
    def head_dim(self) -> int:
        return self.hidden // self.n_head

    def model_spec(self):
        """The same shape as the cost model's ``ModelSpec`` (same parameter count, same
        per-layer communication), so a measured run can be printed beside the prediction."""
        from parlab.costmodel import ModelSpec

        return ModelSpec("tinygpt", layers=self.n_layer, hidden=self.hidden, heads=self.n_head,
                         seq_len=self.seq_len, vocab=self.vocab_size, ffn_hidden=self.ffn,
                         tied_embeddings=self.tie_embeddings, dropout=self.dropout > 0,
                         source="parlab.parallel.model")


# ---------------------------------------------------------------------------- attention
def split_heads(qkv: torch.Tensor, n_head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(b, s, 3 * a * d) laid out [q | k | v], heads in order inside each -> q, k, v (b, a, s, d)."""
    b, s, three_h = qkv.shape
    d = three_h // (3 * n_head)
    q, k, v = qkv.view(b, s, 3, n_head, d).permute(2, 0, 3, 1, 4).unbind(0)
    return q, k, v


def merge_heads(y: torch.Tensor) -> torch.Tensor:
    """(b, a, s, d) -> (b, s, a * d)."""
    b, a, s, d = y.shape
    return y.transpose(1, 2).reshape(b, s, a * d)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     dropout: nn.Module | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + causal mask) v, per head (Vaswani et al. 2017, Eq. 1)."""
    s, d = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # (b, a, s, d) @ (b, a, d, s) -> (b, a, s, s)
    future = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    probs = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    if dropout is not None:
        probs = dropout(probs)
    return probs @ v  # (b, a, s, s) @ (b, a, s, d) -> (b, a, s, d)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.qkv(x)  # (b, s, h) @ (h, 3h) -> (b, s, 3h)
        q, k, v = split_heads(qkv, self.n_head)  # (b, a, s, d) each
        y = merge_heads(causal_attention(q, k, v, self.attn_drop))  # (b, s, h)
        return self.resid_drop(self.proj(y))  # (b, s, h) @ (h, h) -> (b, s, h)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.hidden, cfg.ffn)
        self.proj = nn.Linear(cfg.ffn, cfg.hidden)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.gelu(self.fc(x))  # (b, s, h) @ (h, f) -> (b, s, f)
        return self.drop(self.proj(y))  # (b, s, f) @ (f, h) -> (b, s, h)


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x))."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.hidden)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.hidden)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


# ---------------------------------------------------------------------------- the model
class TinyGPT(nn.Module):
    def __init__(self, config: GPTConfig | None = None):
        super().__init__()
        cfg = GPTConfig() if config is None else config
        if not isinstance(cfg, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(cfg).__name__}")
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.hidden)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.hidden)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        init_weights(self, cfg)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """The logits (b, s, V), or the mean cross-entropy loss if ``targets`` are given."""
        check_tokens(idx, self.config, targets)
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (b, s, h)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (b, s, h) @ (h, V) -> (b, s, V)
        return logits if targets is None else lm_loss(logits, targets)


def init_weights(model: nn.Module, cfg: GPTConfig) -> None:
    """GPT-2's initialisation from one seeded generator, module by module in a fixed order:
    N(0, 0.02) for embeddings and linear weights, N(0, 0.02 / sqrt(2 n_layer)) for the
    projections that write into the residual stream (Radford et al. 2019, Section 2.3), zero
    biases, LayerNorm weight 1 and bias 0."""
    g = torch.Generator().manual_seed(cfg.seed)
    residual_std = INIT_STD / math.sqrt(2 * cfg.n_layer)
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
            elif isinstance(module, nn.Embedding):
                module.weight.normal_(0.0, INIT_STD, generator=g)
            elif isinstance(module, nn.Linear):
                if name == "lm_head" and cfg.tie_embeddings:
                    continue  # the token embedding, already drawn
                std = residual_std if name.endswith(".proj") else INIT_STD
                module.weight.normal_(0.0, std, generator=g)
                if module.bias is not None:
                    module.bias.zero_()


def check_tokens(idx: object, cfg: GPTConfig, targets: object = None) -> None:
    """idx (and targets) must be (b, s) integer tensors with s <= seq_len and ids < vocab_size."""
    for name, t in (("idx", idx), ("targets", targets)):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor) or t.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"{name} must be a torch int64 tensor of token ids, got "
                            f"{getattr(t, 'dtype', type(t).__name__)}")
        if t.dim() != 2 or t.shape[1] > cfg.seq_len or t.shape[1] == 0:
            raise ValueError(f"{name} must have shape (batch, s) with 1 <= s <= seq_len="
                             f"{cfg.seq_len}, got {tuple(t.shape)}")
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= cfg.vocab_size):
            raise ValueError(f"{name} holds token ids outside 0..vocab_size-1 = "
                             f"0..{cfg.vocab_size - 1}: min {int(t.min())}, max {int(t.max())}")
    if targets is not None and targets.shape != idx.shape:
        raise ValueError(f"targets must have the shape of idx {tuple(idx.shape)}, got "
                         f"{tuple(targets.shape)}")


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over every position: -mean log softmax(logits)[target]."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def count_params(model: nn.Module) -> int:
    """Distinct parameters (a tied weight counts once)."""
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------- training
def make_optimizer(params: Iterable[torch.nn.Parameter], name: str = "adamw",
                   lr: float = 3e-3) -> torch.optim.Optimizer:
    """AdamW (betas 0.9, 0.95, no weight decay: Loshchilov & Hutter 2019) or plain SGD."""
    positive("lr", lr)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}")


def train_reference(model: nn.Module, batches: Iterable[tuple], steps: int, lr: float = 3e-3,
                    optimizer: str = "adamw") -> list[float]:
    """Serial training, the reference every parallel trainer must reproduce: ``steps`` steps of
    forward, backward and ``optimizer`` on consecutive ``(inputs, targets)`` of ``batches``;
    returns the loss of each step (before its update)."""
    positive("steps", steps, integer=True)
    opt = make_optimizer(model.parameters(), optimizer, lr)
    losses: list[float] = []
    for _, (x, y) in zip(range(steps), batches, strict=False):
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if len(losses) < steps:
        raise ValueError(f"batches ran out after {len(losses)} of steps={steps}")
    return losses


@torch.no_grad()
def mean_loss(model: nn.Module, batches: Iterable[tuple], steps: int) -> float:
    """The mean loss over ``steps`` batches, without gradients (evaluation)."""
    positive("steps", steps, integer=True)
    total = [float(model(x, y)) for _, (x, y) in zip(range(steps), batches, strict=False)]
    return sum(total) / len(total)
