"""For ``step_time``: the links a layout's process groups get, and one layer's tensor-parallel
communication on its TP link, memoised (a search prices many plans per layout; attack review
F17). Both are pure in their arguments, which are all of their key: they read no plan, only
what ``step_time`` derives from it, so no plan field can be missing from a key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from types import MappingProxyType

from parlab.costmodel.pricing.collectives import GroupLink, group_link
from parlab.costmodel.pricing.tensor_parallel.megatron import tp_layer_collectives
from parlab.costmodel.specs.cluster import Cluster
from parlab.layout import GroupSpan, group_span


@lru_cache(maxsize=1024)
def layout_links(cluster: Cluster, t: int, dp: int, p: int, cp: int, ep: int
                 ) -> tuple[Mapping[str, GroupSpan], Mapping[str, GroupLink]]:
    """(spans, links) of a layout's groups, tp, dp (the dense gradients' group: dp x cp ranks),
    pp, and cp, ep, edp where > 1: ``layout.group_span`` placed on ``collectives.group_link``.
    Read-only mappings (one pair is shared by every caller of the memo)."""
    dims = ("tp", "dp-cp", "pp") + (("cp",) if cp > 1 else ()) + (("ep", "edp") if ep > 1 else ())
    spans = {d: group_span(d, t, dp, p, cluster.gpus_per_node, cp, ep) for d in dims}
    spans["dp"] = spans.pop("dp-cp")  # the dense gradients' group: dp x cp ranks (dp with cp = 1)
    return MappingProxyType(spans), MappingProxyType({d: group_link(cluster, spans[d]) for d in spans})


@lru_cache(maxsize=4096)
def tp_layer_time(b: int, s: int, h: int, t: int, sp: bool, recompute: str, link: GroupLink, bpe: int,
                  again: float = 0.0) -> tuple[float, float]:
    """(seconds, collectives) of one layer's TP communication for one micro-batch of b sequences
    of s tokens: ``tensor_parallel.tp_layer_collectives`` (Megatron-LM's f/g: 2 all-reduces
    forward, 2 backward, 2 more with full recompute; with SP each an all-gather + reduce-scatter
    pair) on the TP group's ``link`` at ``bpe`` bytes per element. ``again``: the share of the
    layers whose MLP (or MoE) module-level recompute repeats its forward collective inside the
    checkpoint (Megatron-Core ``recompute_modules``), adding half the forward collectives x that
    share. One "collective" counted is one all-reduce, or with SP one all-gather + reduce-scatter
    pair."""
    colls = tp_layer_collectives(b, s, h, t, sp, recompute)
    if again:
        colls += tuple(replace(c, count=c.count * again / 2) for c in colls if c.phase == "forward")
    per_layer = sum(c.count * link.time(c.op, c.elements * bpe, t) for c in colls)
    return per_layer, sum(c.count for c in colls if c.op != "reduce_scatter")
