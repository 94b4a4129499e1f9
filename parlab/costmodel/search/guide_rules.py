"""The guide's words for a plan and its decision rules (guide 3.3-3.5 and its closing summary):
``layout`` names a plan's kind, ``guide_rule`` is what the guide recommends for a cluster, so that the
advisor (``search.advisor``) can be checked against it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from parlab.costmodel.plan.estimate import Estimate
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.specs.cluster import Cluster

#: the guide's line between a fast and a slow network (guide 1.18: special networks of hundreds of
#: Gb/s against a data centre's ordinary 10 Gb/s; 3.5: "10 GbE certainly does not count")
FAST_NETWORK_GBIT = 100.0


# -- what kind of plan it is -------------------------------------------------------------------------
def layout(plan: Plan) -> str:
    """The kind of a plan in the guide's words: 'one GPU', 'DP (ZeRO-1) + PP', 'DP + TP + PP', ...,
    with '+ offload' when it moves states to the CPU."""
    parts = []
    if plan.dp > 1:
        parts.append(f"DP (ZeRO-{plan.zero})" if plan.zero else "DP")
    if plan.tp > 1:
        parts.append("TP")
    if plan.pp > 1:
        parts.append("PP")
    head = " + ".join(parts) or "one GPU"
    return head + (" + offload" if plan.offload != "none" else "")


def is_plain_replica(plan: Plan) -> bool:
    """Every GPU holds the whole model and all its states: no ZeRO, TP, PP or offload."""
    return plan.zero == 0 and plan.tp == 1 and plan.pp == 1 and plan.offload == "none"


def largest_extra(slower: Estimate, faster: Estimate) -> tuple[str, float]:
    """The step-time term on which ``slower`` pays most over ``faster``: (term, seconds)."""
    a, b = slower.time_terms(), faster.time_terms()
    term = max(a, key=lambda t: a[t] - b.get(t, 0.0))
    return term, a[term] - b.get(term, 0.0)


# -- the guide's rule for the same setting -------------------------------------------------------
@dataclass(frozen=True)
class GuideRule:
    """What the guide recommends for a setting: the section, its words, and which plans count."""

    section: str
    situation: str
    says: str
    accepts: Callable[[Plan], bool]


def has_nvlink(cluster: Cluster) -> bool:
    """GPUs of a node talk over NVLink/NVSwitch (not PCIe)."""
    return cluster.intra.name.startswith("nvlink")


def fast_network(cluster: Cluster) -> bool:
    """The guide's 'fast' network between nodes: at least ``FAST_NETWORK_GBIT`` per port."""
    return cluster.inter.gbit >= FAST_NETWORK_GBIT


def guide_rule(cluster: Cluster, plain_fits: bool) -> GuideRule:
    """The guide's decision for a cluster (guide 3.3, 3.4, 3.5 and the closing summary), given
    whether a plain replica of the model fits on one GPU."""
    if cluster.n_gpus == 1:
        if plain_fits:
            return GuideRule("3.3", "one GPU, the model fits", "train on it as it is",
                             lambda p: p.offload == "none")
        return GuideRule("3.3", "one GPU, the model does not fit", "offload to the CPU",
                         lambda p: p.offload != "none")
    if cluster.nodes == 1:
        if plain_fits:
            return GuideRule("3.4", "one node, the model fits on one GPU", "DDP or ZeRO",
                             lambda p: p.tp == 1 and p.pp == 1 and p.offload == "none")
        if not has_nvlink(cluster):
            return GuideRule("3.4", "one node without NVLink, the model does not fit", "PP (no TP without NVLink)",
                             lambda p: p.pp > 1 and p.tp == 1)
        return GuideRule("3.4", "one node with NVLink, the model does not fit", "TP, ZeRO or PP",
                         lambda p: p.tp > 1 or p.pp > 1 or p.zero > 0)
    if not has_nvlink(cluster) and not fast_network(cluster):
        return GuideRule("summary", "several nodes, no NVLink, slow network", "PP and ZeRO-1, no TP",
                         lambda p: p.pp > 1 and p.tp == 1 and p.zero <= 1)
    if fast_network(cluster):
        return GuideRule("3.5", "several nodes, fast network", "ZeRO or 3D",
                         lambda p: (p.zero > 0 and p.tp == 1 and p.pp == 1) or (p.tp > 1 and p.pp > 1))
    return GuideRule("3.5", "several nodes, slow network", "DP + PP + TP + ZeRO-1",
                     lambda p: p.dp > 1 and p.pp > 1 and p.tp > 1 and p.zero == 1)
