"""The units of ZeRO: groups of parameters flattened into one padded buffer and gathered,
reduced and updated together (PyTorch FSDP's FlatParameter, Zhao et al. 2023, Sec. 3.2).

Each ``nn.ModuleList`` entry of the model (TinyGPT's blocks) is a unit and the rest (embeddings,
final norm, tied head) the root unit. A unit's parameters become views of its flat working
buffer, padded to a multiple of the ranks (``shard``); rank r owns block r of it. Frozen
parameters (``requires_grad=False``) belong to no unit: they stay as they are on every rank.
"""

from __future__ import annotations

import torch
from torch import nn

from .shard import shard_plan


class Unit:
    """One flat group of parameters gathered, reduced and updated together. ``name``: the
    module's name in the model ('' for the root); ``names``: its parameters' names."""

    def __init__(self, module: nn.Module, name: str, params: list[nn.Parameter], names: list[str],
                 world: int, rank: int, dtype: torch.dtype):
        self.module, self.name, self.names = module, name, names
        self.shapes = [p.shape for p in params]
        self.plan = shard_plan(sum(p.numel() for p in params), world)
        self.lo = self.plan.start(rank)
        self.buffer = torch.zeros(self.plan.padded, dtype=dtype)  # (padded,) the working weights
        self.nbytes = self.buffer.untyped_storage().nbytes()
        offset = 0
        with torch.no_grad():
            for p in params:
                self.buffer[offset:offset + p.numel()] = p.detach().reshape(-1)
                offset += p.numel()
        self.params = [nn.Parameter(v.view(s)) for v, s in zip(self.views(self.buffer), self.shapes,
                                                                strict=True)]
        self.grad_bucket: torch.Tensor | None = None  # (padded,) stage 0-1: always; 2-3: in backward
        self.grad_shard: torch.Tensor | None = None   # (shard,) the owned, averaged gradient
        self.pending = 0       # gradients this backward still waits for
        self.gathering = None  # the handle of a prefetched all-gather
        self.gathered = True
        self.seen = False      # stage 3: gathered in this forward (or backward) already

    def describe(self) -> str:
        """'unit blocks.1 (blocks.1.ln_1.weight, ...)' for an error message."""
        more = ", ..." if len(self.names) > 1 else ""
        return f"unit {self.name or '<root>'} ({self.names[0]}{more})"

    def owned(self, flat: torch.Tensor) -> torch.Tensor:
        """This rank's block of ``flat`` (a (padded,) buffer of the unit): a (shard,) view."""
        return flat[self.lo:self.lo + self.plan.shard]

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Each parameter's 1-D slice of ``flat`` ((padded,) or longer), in order."""
        out, offset = [], 0
        for s in self.shapes:
            n = s.numel()
            out.append(flat[offset:offset + n])
            offset += n
        return out

    def new_bucket(self) -> None:
        """A zeroed (padded,) gradient bucket in the working dtype, attached."""
        self.attach_grads(torch.zeros(self.plan.padded, dtype=self.buffer.dtype))

    def attach_grads(self, bucket: torch.Tensor) -> None:
        """Autograd accumulates into views of ``bucket`` (DDP's gradient_as_bucket_view)."""
        self.grad_bucket = bucket
        for p, v in zip(self.params, self.views(bucket), strict=True):
            p.grad = v.view(p.shape)


def replace_params(module: nn.Module, old: list[nn.Parameter], new: list[nn.Parameter]) -> None:
    """Point every attribute holding an ``old`` parameter (tied weights: several) at its ``new`` one."""
    swap = {id(o): n for o, n in zip(old, new, strict=True)}
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is not None and id(p) in swap:
                m._parameters[name] = swap[id(p)]


def find_units(module: nn.Module) -> list[tuple[nn.Module, str, list[nn.Parameter], list[str]]]:
    """(module, its name, its distinct trainable parameters, their names): the root first
    (parameters outside any unit), then every entry of the model's ``nn.ModuleList`` children
    (TinyGPT's blocks), in forward order."""
    names = {id(p): n for n, p in module.named_parameters()}
    inner = [(f"{cname}.{i}", m) for cname, child in module.named_children()
             if isinstance(child, nn.ModuleList) for i, m in enumerate(child)]
    taken = {id(p) for _, m in inner for p in m.parameters()}
    root = [p for p in module.parameters() if id(p) not in taken and p.requires_grad]
    out = [(module, "", root, [names[id(p)] for p in root])]
    for name, m in inner:
        params = [p for p in m.parameters() if p.requires_grad]
        out.append((m, name, params, [names[id(p)] for p in params]))
    return out
