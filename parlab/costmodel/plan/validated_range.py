"""Whether an estimate lies inside the range the published runs cover (``specs.calibration``).

The model prices any plan on any cluster, but it was checked only on A100s over NVLink 3 and
InfiniBand HDR / Omni-Path, at MFUs up to the highest measured there. Outside that range a
prediction is an extrapolation: ``outside_validated_range`` says why in one line per reason, and
``Estimate.explain`` and the advisor print it. The ranking is not changed by it.
"""

from __future__ import annotations

from parlab.costmodel.specs.calibration import VALIDATED_INTER, VALIDATED_INTRA, VALIDATED_MFU
from parlab.costmodel.specs.cluster import Cluster


def outside_validated_range(cluster: Cluster, mfu: float) -> tuple[str, ...]:
    """One reason per way the setting leaves the validated range (empty: inside it): a GPU with no
    validated row, an MFU above the highest measured on that GPU, a link inside or between nodes that
    no validated row ran on (only the links the cluster uses: none for one GPU, no inter-node link on
    one node)."""
    gpu = cluster.gpu.name
    out = []
    if gpu not in VALIDATED_MFU:
        out.append(f"no published run on {gpu} was validated (validated: {', '.join(sorted(VALIDATED_MFU))})")
    elif mfu > VALIDATED_MFU[gpu]:
        out.append(f"MFU {mfu:.1%} is above the highest validated on {gpu} ({VALIDATED_MFU[gpu]:.1%})")
    if cluster.gpus_per_node > 1 and cluster.n_gpus > 1 and cluster.intra.name not in VALIDATED_INTRA:
        out.append(f"the link inside a node, {cluster.intra.name}, was never validated "
                   f"(validated: {', '.join(sorted(VALIDATED_INTRA))})")
    if cluster.nodes > 1 and cluster.inter.name not in VALIDATED_INTER:
        out.append(f"the link between nodes, {cluster.inter.name}, was never validated "
                   f"(validated: {', '.join(sorted(VALIDATED_INTER))})")
    return tuple(out)
