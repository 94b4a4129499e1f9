"""The hooks of ``stages.ZeroDataParallel`` where stage 3 gathers and frees its units (stage 2
uses ``_forward_post`` only), in the one order every rank follows whatever its own forward and
backward reach: forward in unit order, backward the root then the blocks last to first. A unit
this rank skips (it did not run here, or backward never reached it) is gathered in its turn all
the same, so every all-gather pairs a unit with itself on every rank. A collective where the
ranks still disagree raises ``CollectiveMismatch`` again, naming the unit and its parameters.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from parlab.comm.errors import CollectiveMismatch

from ..data_parallel.ddp import _Done, supports_async
from .unit import Unit


class UnitHooks:
    """Gather, free and hook the units of a ZeRO engine (``self.units``, ``self.comm``,
    ``self.stage``, ``self.world``, ``self.prefetch``, ``self.ledger``, ``self._gather_order``)."""

    @contextmanager
    def _named(self, unit: Unit, what: str):
        """A collective of ``unit``: ranks that disagree get an error naming it and the rule."""
        try:
            yield
        except CollectiveMismatch as err:
            raise CollectiveMismatch(
                f"ZeRO stage {self.stage} on rank {self.comm.rank}, {what} {unit.describe()}: {err} "
                f"(a unit used on some ranks only? ZeRO-3 needs every rank to run and backpropagate "
                f"every unit in the same order; stages 0-2 do not)") from err

    # ---------------------------------------------------------------- stage 3: gather and free
    def _start_gather(self, unit: Unit, asynchronous: bool) -> None:
        if unit.gathered:
            return
        unit.buffer.untyped_storage().resize_(unit.nbytes)  # the full unit is held from here on
        src = unit.opt.fetch()  # (shard,)
        with self._named(unit, "gathering"):
            if self.world == 1:
                unit.gathering = _Done(src)
            elif asynchronous and supports_async(self.comm):
                unit.gathering = self.comm.all_gather(src, async_op=True)
            else:
                unit.gathering = _Done(self.comm.all_gather(src))
        unit.gathered = True

    def _ensure_gathered(self, unit: Unit) -> None:
        self._start_gather(unit, asynchronous=False)
        if unit.gathering is not None:
            # into the buffer by copy (a collective's ``out`` may pin the storage: numpy's view
            # of it makes it unresizable); .data: autograd sees no in-place write of a parameter
            with self._named(unit, "gathering"):
                unit.buffer.data.copy_(unit.gathering.wait())  # (padded,)
            unit.gathering = None

    def _free(self, unit: Unit) -> None:
        self._ensure_gathered(unit)  # never free under an all-gather still writing
        unit.buffer.untyped_storage().resize_(0)
        unit.gathered = False

    def _forward_begin(self, module, args) -> None:
        for u in self.units:
            u.seen = False

    def _forward_end(self, module, args, output) -> None:
        """Units this rank's forward skipped are gathered (and freed) in their turn all the same."""
        for u in self.units:
            if not u.seen:
                u.seen = True
                self._free(u)

    def _forward_pre(self, i: int):
        def hook(module, args):
            for u in self.units[:i]:  # skipped on this rank: gathered (as elsewhere) and freed
                if not u.seen:
                    u.seen = True
                    self._free(u)
            self.units[i].seen = True
            self._ensure_gathered(self.units[i])
            if self.prefetch and i + 1 < len(self.units):
                self._start_gather(self.units[i + 1], asynchronous=True)
            self.ledger.sample(("forward", i))
        return hook

    def _forward_post(self, i: int):
        """After the unit's forward: a hook on its output's gradient (the moment its backward
        begins, as FSDP2 hooks its outputs), and stage 3 frees the unit. The root unit (the
        whole model's forward) is freed only at the end of forward, as its embedding and head
        run first and last; backward gathers it again first, so every unit is gathered twice."""
        def hook(module, args, output):
            if isinstance(output, torch.Tensor) and output.requires_grad:
                output.register_hook(lambda grad: self._backward_pre(i))
            if self.stage == 3:
                self._free(self.units[i])
        return hook

    def _visit(self, unit: Unit) -> None:
        """Stage 3 in backward: the unit gathered again, its gradient bucket allocated."""
        unit.seen = True
        self._ensure_gathered(unit)
        if unit.grad_bucket is None:
            unit.new_bucket()

    def _backward_pre(self, i: int) -> None:
        """Before unit ``i``'s backward: stage 3 gathers it again (first the units before it in
        the gather order that this rank's backward skipped) and prefetches the next one; its
        gradient bucket is allocated."""
        self._begin_backward()
        unit = self.units[i]
        if self.stage == 3 and not unit.seen:
            order = self._gather_order
            at = order.index(i)
            for j in order[:at + 1]:
                if not self.units[j].seen:
                    self._visit(self.units[j])
            if self.prefetch and at + 1 < len(order) and not self.units[order[at + 1]].seen:
                self._start_gather(self.units[order[at + 1]], asynchronous=True)
        elif self.stage == 3:
            self._ensure_gathered(unit)
        if unit.grad_bucket is None:
            unit.new_bucket()
        self.ledger.sample(("backward", i))


class _ScaleGrad(torch.autograd.Function):
    """Identity forward (the loss as it is); backward multiplies the gradient by the loss scale."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None
