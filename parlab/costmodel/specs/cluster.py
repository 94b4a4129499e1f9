"""A cluster (GPU preset, GPU count, nodes, intra- and inter-node links). The rank layout of a
DP x TP x PP plan on it (which GPUs each group spans, and so which link its collectives use)
lives in ``parlab.layout``, shared with the runtime."""

from __future__ import annotations

from dataclasses import dataclass, replace

from parlab.costmodel.specs._check import canonical, instance, positive, text
from parlab.costmodel.specs.hardware import GPUSpec, get_gpu
from parlab.costmodel.specs.links import LinkSpec, get_link
from parlab.tables import human_rate, plural

#: The most GPUs the cost model takes: 2^24 = 16,777,216, 16 x the 1,048,576 at which ``search``
#: is timed (a few seconds) and about 100 x the largest clusters built so far (~10^5 GPUs).
#: Everything it computes is closed-form in the GPU count except ``search``'s enumeration of
#: layouts (divisors: O(sqrt n)), which this bound keeps to seconds.
MAX_GPUS = 1 << 24


def gpu_count(name: str, value) -> int:
    """``value`` if it is a GPU count in 1..MAX_GPUS, else the error naming it and the bound."""
    n = positive(name, value, integer=True)
    if n > MAX_GPUS:
        raise ValueError(f"{name} must be at most {MAX_GPUS:,} (2^24, parlab.costmodel.MAX_GPUS: "
                         f"the cost model's stated bound), got {value:,}")
    return n


@dataclass(frozen=True)
class Cluster:
    """``n_gpus`` GPUs of one kind, ``gpus_per_node`` to a node.

    Inside a node GPUs talk over ``intra`` (NVLink/NVSwitch or PCIe); between nodes over
    ``nics_per_node`` ports of ``inter`` (a DGX A100 has 8 HDR ports, one per GPU; a commodity
    server often one 10 GbE port for all its GPUs). ``host`` is the GPU <-> CPU link that offload
    uses. Bandwidths are per direction (see ``parlab.costmodel.specs.links``).
    """

    gpu: GPUSpec
    n_gpus: int
    gpus_per_node: int = 8
    intra: LinkSpec = get_link("nvlink3-a100")
    inter: LinkSpec = get_link("ib-hdr")
    nics_per_node: int = 8
    host: LinkSpec = get_link("pcie4")
    name: str = ""

    def __post_init__(self) -> None:
        instance("Cluster.gpu", self.gpu, GPUSpec, "get_gpu('a100')")
        for field in ("intra", "inter", "host"):
            instance(f"Cluster.{field}", getattr(self, field), LinkSpec, "get_link('ib-hdr')")
        text("Cluster.name", self.name)
        gpu_count("n_gpus", self.n_gpus)
        positive("gpus_per_node", self.gpus_per_node, integer=True)
        positive("nics_per_node", self.nics_per_node, integer=True)
        if self.n_gpus > self.gpus_per_node and self.n_gpus % self.gpus_per_node:
            raise ValueError(f"a cluster is made of whole nodes: n_gpus={self.n_gpus} is not a multiple "
                             f"of gpus_per_node={self.gpus_per_node}")

    @property
    def nodes(self) -> int:
        return max(1, self.n_gpus // self.gpus_per_node)

    @property
    def net_share_per_gpu(self) -> float:
        """Achievable inter-node bytes/s one GPU gets when every GPU of its node talks at once:
        ports x port bandwidth x efficiency / GPUs per node."""
        return self.inter.achievable * self.nics_per_node / self.gpus_per_node

    def with_gpus(self, n_gpus: int) -> Cluster:
        """The same kind of cluster with another GPU count."""
        return replace(self, n_gpus=n_gpus)

    def describe(self) -> str:
        """One line: '1,024 x a100-80gb: 128 nodes of 8 GPUs, nvlink3-a100 (300 GB/s) inside,
        8 x ib-hdr (200 Gb/s) between nodes'. Link speeds are per direction; a single node has
        no inter-node link to print, a single GPU no link at all."""
        if self.n_gpus == 1:
            return f"1 x {self.gpu.name} (a single GPU)"
        head = (f"{self.n_gpus:,} x {self.gpu.name}: {plural(self.nodes, 'node')} of "
                f"{plural(min(self.n_gpus, self.gpus_per_node), 'GPU')}, "
                f"{self.intra.name} ({human_rate(self.intra.bandwidth)}) inside")
        if self.nodes == 1:
            return head
        return f"{head}, {self.nics_per_node} x {self.inter.name} ({self.inter.gbit:.3g} Gb/s) between nodes"


#: named cluster kinds: (gpu, gpus per node, intra link, inter link, NICs per node). A "node" is
#: one intra-node link domain: 72 GPUs for the GB200 NVL72 rack.
CLUSTERS: dict[str, tuple[str, int, str, str, int]] = {
    "dgx-a100": ("a100-80gb", 8, "nvlink3-a100", "ib-hdr", 8),  # Selene, Megatron-LM 2021
    "dgx-a100-40gb": ("a100-40gb", 8, "nvlink3-a100", "ib-hdr", 8),
    "a800-hdr": ("a800-80gb", 8, "nvlink3-a800", "ib-hdr", 4),
    "dgx-h100": ("h100-sxm", 8, "nvlink4-h100", "ib-ndr", 8),
    # DeepSeek-V3's cluster (tech report, Sec. 3.1 and 3.2.2): 2,048 H800s, 8 per node on NVLink
    # (160 GB/s achieved of 200) and one 400 Gb/s InfiniBand port per GPU (50 GB/s)
    "h800-ndr": ("h800", 8, "nvlink4-h800", "ib-ndr", 8),
    "h800-roce": ("h800", 8, "nvlink4-h800", "400gbe", 8),  # China market: RoCE v2 instead of IB
    "h20-roce": ("h20", 8, "nvlink4-h100", "400gbe", 8),
    "dgx-h200": ("h200", 8, "nvlink4-h100", "ib-ndr", 8),
    "dgx-b200": ("b200", 8, "nvlink5", "ib-ndr", 8),  # DGX B200 datasheet: 8 x ConnectX-7 400 Gb/s
    # GB200 NVL72: 72 GPUs in one NVLink 5 domain (NVIDIA datasheet); one ConnectX-7 400 Gb/s port
    # per GPU as DGX GB200 is described (not verified here: XDR 800 Gb/s ports are also sold)
    "gb200-nvl72": ("gb200", 72, "nvlink5", "ib-ndr", 72),
    "mi300x-roce": ("mi300x", 8, "infinity-fabric-mi300x", "400gbe", 8),  # AMD MI300X platform, 8 OAMs
    "pcie-25gbe": ("a100-80gb", 8, "pcie4", "25gbe", 1),
    "pcie-10gbe": ("a100-80gb", 8, "pcie4", "10gbe", 1),  # the guide's "commodity" cluster (1.18, 1.19)
    # the guide's 平民 ("commoner") box: 8 RTX 4090s on PCIe 4.0 (no NVLink; GeForce cards are not
    # sold with GPU peer-to-peer, so the ring passes through host memory: pcie4's 0.75 efficiency is
    # generous) and one 10 GbE port
    "rtx4090-10gbe": ("rtx4090", 8, "pcie4", "10gbe", 1),
}
_CLUSTER_ALIASES = {"selene": "dgx-a100", "dgx": "dgx-a100", "commodity": "pcie-10gbe",
                    "poor": "pcie-10gbe", "deepseek-v3": "h800-ndr", "h800": "h800-ndr", "h20": "h20-roce",
                    "nvl72": "gb200-nvl72", "gb200": "gb200-nvl72",
                    "mi300x": "mi300x-roce", "4090": "rtx4090-10gbe", "rtx4090": "rtx4090-10gbe",
                    "commoner": "rtx4090-10gbe"}


def own_intra(kind: str, gpu: GPUSpec) -> str:
    """The intra-node link of a ``kind`` cluster built with ``gpu``: the kind's own link when
    ``gpu`` is the kind's GPU, or when the kind is a PCIe box (a PCIe server stays one whatever card
    it holds); else, in an NVLink (or Infinity Fabric) kind, the link ``gpu`` itself brings
    (``GPUSpec.intra``: an H100 in a DGX A100's place brings NVLink 4, not the A100's NVLink 3)."""
    g, _, intra, _, _ = CLUSTERS[kind]
    if gpu.name == g or intra.startswith("pcie") or not gpu.intra:
        return intra
    return gpu.intra


def make_cluster(kind: str | None = None, n_gpus: int = 8, *, gpu: str | GPUSpec | None = None,
                 gpus_per_node: int | None = None, intra: str | LinkSpec | None = None,
                 inter: str | LinkSpec | None = None, nics_per_node: int | None = None) -> Cluster:
    """A cluster of a named kind (``CLUSTERS``; None: 'dgx-a100') with ``n_gpus`` GPUs; any field
    can be overridden.

    An override of None keeps the preset's value; any other value is checked (0 GPUs per node is
    an error, not "the preset's"). A ``gpu`` other than the kind's brings its own intra-node link
    unless ``intra`` is given (``own_intra``)."""
    key = canonical("cluster", "dgx-a100" if kind is None else kind, CLUSTERS, _CLUSTER_ALIASES)
    g, per_node, intra_name, inter_name, nics = CLUSTERS[key]
    if gpus_per_node is not None:
        per_node = positive("gpus_per_node", gpus_per_node, integer=True)
    if nics_per_node is not None:
        nics = positive("nics_per_node", nics_per_node, integer=True)
    card = get_gpu(g if gpu is None else gpu)
    return Cluster(card, gpu_count("n_gpus", n_gpus), per_node,
                   get_link(own_intra(key, card) if intra is None else intra),
                   get_link(inter_name if inter is None else inter), nics, name=key)
