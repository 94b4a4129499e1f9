"""What a run really held and when it ran: saved activations (saved-tensor hooks), a per-phase
timeline, and the bytes of model states held (``held_bytes``, ``MemoryLedger``), for any executor
(pipeline, ZeRO, 3D) on any rank.

    acts = SavedActivations(model.parameters())    # parameters are state, not activations
    with acts.tag(("F", 0)):                        # everything autograd saves here is tagged
        loss = model(x, y)
    acts.live_bytes, acts.peak_bytes, acts.bytes_of[("F", 0)]
    loss.backward()                                 # the graph frees its saved tensors: live -> 0

``SavedActivations`` counts what autograd keeps for the backward pass: every tensor a forward
saves passes through ``torch.autograd.graph.saved_tensors_hooks`` (PyTorch's "saved tensors
hooks", the mechanism activation offloading and checkpointing are built on). A saved tensor is
counted by its storage (two saves of one tensor count once), from its save until the graph
releases it (after the backward that used it, or when the graph is dropped); tensors sharing a
parameter's storage (the weight a matmul saves) are not activations and are left out. Peak live
bytes is the number the cost model's activation term predicts (Korthikanti et al. 2022, Sec. 4).

``PhaseClock`` records (label, start, end) spans on ``time.monotonic()``, the clock every process
of one machine shares, so the spans of all ranks line up on one axis once the earliest start is
subtracted (``align``).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch


class _Saved:
    """What the pack hook hands autograd: the tensor, and a finalizer that un-counts it."""

    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor


class SavedActivations:
    """Live and peak bytes of the tensors autograd saves, overall and per tag."""

    def __init__(self, params: Iterable[torch.Tensor] = ()):
        self._param_storages = {p.untyped_storage().data_ptr() for p in params}
        self._storages: dict[int, list] = {}  # storage ptr -> [nbytes, refs, tags set]
        self._tag_refs: dict[Hashable, int] = {}  # tag -> saved tensors of it still alive
        self._tag: Hashable | None = None
        self.live_bytes = 0
        self.peak_bytes = 0
        self.peak_tags = 0  # most tags with saved tensors alive at once
        self.bytes_of: dict[Hashable, int] = {}  # tag -> distinct bytes its forward saved

    @property
    def live_tags(self) -> int:
        """Tags (e.g. micro-batches) whose saved tensors are still held."""
        return len(self._tag_refs)

    @contextmanager
    def tag(self, tag: Hashable) -> Iterator[None]:
        """Count what autograd saves inside the block under ``tag``."""
        previous, self._tag = self._tag, tag
        try:
            with torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack):
                yield
        finally:
            self._tag = previous

    def _pack(self, t: torch.Tensor) -> object:
        ptr = t.untyped_storage().data_ptr()
        if ptr in self._param_storages or t.device.type == "meta":
            return t
        entry = self._storages.get(ptr)
        tag = self._tag
        if entry is None:
            nbytes = t.untyped_storage().nbytes()
            entry = self._storages[ptr] = [nbytes, 0]
            self.live_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
            self.bytes_of[tag] = self.bytes_of.get(tag, 0) + nbytes
        entry[1] += 1
        self._tag_refs[tag] = self._tag_refs.get(tag, 0) + 1
        self.peak_tags = max(self.peak_tags, len(self._tag_refs))
        saved = _Saved(t)
        weakref.finalize(saved, self._release, ptr, tag)
        return saved

    def _release(self, ptr: int, tag: Hashable) -> None:
        entry = self._storages[ptr]
        entry[1] -= 1
        if entry[1] == 0:
            self.live_bytes -= entry[0]
            del self._storages[ptr]
        self._tag_refs[tag] -= 1
        if self._tag_refs[tag] == 0:
            del self._tag_refs[tag]


def _unpack(saved: object) -> torch.Tensor:
    return saved.tensor if isinstance(saved, _Saved) else saved


@dataclass
class PhaseClock:
    """Spans ``(label, start, end)`` in seconds of ``time.monotonic()`` (shared by the machine's
    processes); ``with clock.phase(label):`` records one."""

    spans: list[tuple[object, float, float]] = field(default_factory=list)

    @contextmanager
    def phase(self, label: object) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.spans.append((label, t0, time.monotonic()))


def align(per_rank: list[list[tuple[object, float, float]]]) -> list[list[tuple[object, float, float]]]:
    """The ranks' spans with the earliest start of any rank as time 0 (one common axis)."""
    starts = [t0 for spans in per_rank for _, t0, _ in spans]
    origin = min(starts, default=0.0)
    return [[(label, t0 - origin, t1 - origin) for label, t0, t1 in spans] for spans in per_rank]


# ---------------------------------------------------------------------------- model-state bytes
def held_bytes(groups: Mapping[str, Iterable[torch.Tensor | None]]) -> dict[str, int]:
    """Bytes each category of tensors really holds, by storage: a storage shared by several
    tensors (views of one flat buffer, a tied weight, a master copy that *is* the working copy)
    is counted once, under the first category that names it; a storage resized to 0 bytes (a
    freed ZeRO-3 unit, as PyTorch FSDP frees its unsharded FlatParameter) counts 0."""
    seen: set[int] = set()
    out: dict[str, int] = {}
    for name, tensors in groups.items():
        total = 0
        for t in tensors:
            if t is None:
                continue
            storage = t.untyped_storage()
            nbytes, ptr = storage.nbytes(), storage.data_ptr()
            if nbytes == 0 or ptr in seen:
                continue
            seen.add(ptr)
            total += nbytes
        out[name] = out.get(name, 0) + total
    return out


class MemoryLedger:
    """Bytes of parameters, gradients and optimizer states a rank holds now, and the most of
    each (and of their sum) at any ``sample()`` so far: the measured side of the cost model's
    model-state terms (Rajbhandari et al. 2020, Section 5).

    ``walk()`` returns {category: tensors} of everything the engine holds at that moment; the
    engine calls ``sample(label)`` wherever what it holds changes (a unit gathered or freed, a
    gradient bucket allocated or released, an update done). ``host`` names the categories that
    are not on the device (offloaded state): they are left out of ``peak_total``.
    """

    def __init__(self, walk: Callable[[], Mapping[str, Iterable[torch.Tensor | None]]],
                 host: Iterable[str] = ("host",)):
        self._walk = walk
        self.host = frozenset(host)
        self.reset_peak()

    def now(self) -> dict[str, int]:
        """Bytes held at this moment, by category."""
        return held_bytes(self._walk())

    def sample(self, label: object = None) -> dict[str, int]:
        """Count what is held now and raise the peaks; returns the counts."""
        held = self.now()
        self.history.append((label, held))
        for name, nbytes in held.items():
            self.peak[name] = max(self.peak.get(name, 0), nbytes)
        total = sum(v for k, v in held.items() if k not in self.host)
        if total > self.peak_total:
            self.peak_total, self.peak_label = total, label
        return held

    def reset_peak(self) -> None:
        """Start a new step: peaks from zero, an empty ``history`` ((label, held) per sample)."""
        self.history: list[tuple[object, dict[str, int]]] = []
        self.peak: dict[str, int] = {}
        self.peak_total = 0
        self.peak_label: object = None
