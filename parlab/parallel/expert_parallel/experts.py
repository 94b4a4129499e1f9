"""The experts of an MoE layer as one batched MLP, and the dispatch / combine of tokens to them.

E experts, each TinyGPT's MLP (GeLU(x W_1 + b_1) W_2 + b_2, width f_e), stored stacked so that all
of them run as one batched matmul on their (E, C, h) buffer (GShard's einsum "ECM,EMH->ECH",
Lepikhin et al. 2020, Sec. 2.2; Megatron-Core's GroupedMLP). ``dispatch`` scatters each kept
(token, choice) into its expert's slot, ``combine`` sums the experts' outputs back, weighted by
the gates: y_t = sum_j g_tj E_{e_tj}(x_t) over the kept choices (Shazeer et al. 2017, Eq. 1).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .router import Routing


class GroupedExperts(nn.Module):
    """``n`` expert MLPs h -> f_e -> h, weights (n, h, f_e) and (n, f_e, h), run batched."""

    def __init__(self, n: int, hidden: int, ffn: int):
        super().__init__()
        self.w_in = nn.Parameter(torch.empty(n, hidden, ffn))
        self.b_in = nn.Parameter(torch.zeros(n, ffn))
        self.w_out = nn.Parameter(torch.empty(n, ffn, hidden))
        self.b_out = nn.Parameter(torch.zeros(n, hidden))

    @property
    def num_experts(self) -> int:
        return self.w_in.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (n, rows, h) -> (n, rows, h): expert i on its rows."""
        y = F.gelu(torch.baddbmm(self.b_in.unsqueeze(1), x, self.w_in))  # (n, r, h) @ (n, h, f) -> (n, r, f)
        return torch.baddbmm(self.b_out.unsqueeze(1), y, self.w_out)  # (n, r, f) @ (n, f, h) -> (n, r, h)

    def init_(self, std_in: float, std_out: float, generator: torch.Generator) -> None:
        """N(0, std) weights (GPT-2's, as ``model.init_weights``), zero biases."""
        with torch.no_grad():
            self.w_in.normal_(0.0, std_in, generator=generator)
            self.w_out.normal_(0.0, std_out, generator=generator)
            self.b_in.zero_()
            self.b_out.zero_()

    def slice_(self, source: GroupedExperts, start: int) -> GroupedExperts:
        """Copy experts start .. start + n - 1 of ``source`` into this module (n = its own)."""
        n = self.num_experts
        with torch.no_grad():
            for name in ("w_in", "b_in", "w_out", "b_out"):
                getattr(self, name).copy_(getattr(source, name)[start:start + n])
        return self


def _flat_index(r: Routing) -> tuple[torch.Tensor, torch.Tensor]:
    """(token, buffer row) of every kept assignment: row = expert * C + slot."""
    token = torch.arange(r.tokens).unsqueeze(1).expand_as(r.expert)[r.kept]  # (kept,)
    return token, (r.expert * r.capacity + r.slot)[r.kept]


def dispatch(x: torch.Tensor, r: Routing) -> torch.Tensor:
    """x (T, h) -> the (E, C, h) buffer: row (e, c) holds the token in slot c of expert e, zeros
    in the slots left empty (the padding of a capacity-bound layer)."""
    token, row = _flat_index(r)
    buf = x.new_zeros(r.num_experts * r.capacity, x.shape[-1])  # (E C, h)
    return buf.index_add(0, row, x[token]).view(r.num_experts, r.capacity, -1)


def combine(y: torch.Tensor, r: Routing) -> torch.Tensor:
    """y (E, C, h), the experts' outputs -> (T, h): sum_j g_tj y[e_tj, c_tj] over kept choices."""
    token, row = _flat_index(r)
    picked = y.reshape(-1, y.shape[-1])[row] * r.gate[r.kept].unsqueeze(-1)  # (kept, h)
    return y.new_zeros(r.tokens, y.shape[-1]).index_add(0, token, picked)
