"""Interconnects: LinkSpec (bandwidth per GPU, one direction, and latency) and named presets.

Units are where most bandwidth mistakes come from, so every preset stores **bytes per second,
one direction, per GPU (or per network port)**. Vendors quote two other things:

* network speeds in gigabits per second (Gb/s): 10 GbE is 10 Gb/s = 1.25 GB/s each way;
* NVLink in gigabytes per second *summed over both directions*: the A100's "600 GB/s" is
  12 links x 25 GB/s x 2 directions, i.e. 300 GB/s that a GPU can send while it receives 300.

Collective algorithms send and receive at once, so the one-direction figure is the one that
enters the alpha-beta model (``parlab.costmodel.pricing.collectives``).
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.specs._check import fraction, lookup, positive, text
from parlab.tables import human_rate

GBIT = 1e9 / 8  # bytes per second in one Gb/s
GBYTE = 1e9  # bytes per second in one GB/s
US = 1e-6  # one microsecond


def gbit_per_s(gbit: float) -> float:
    """Bytes per second of a link quoted in Gb/s (network convention): 10 -> 1.25e9."""
    return positive("bandwidth in Gb/s", gbit) * GBIT


def gbyte_per_s(gbyte: float) -> float:
    """Bytes per second of a link quoted in GB/s: 300 -> 3e11."""
    return positive("bandwidth in GB/s", gbyte) * GBYTE


@dataclass(frozen=True)
class LinkSpec:
    """One kind of link, as one GPU (or one network port) sees it.

    ``bandwidth``: line rate in bytes/s, one direction. ``latency``: alpha, the fixed cost of one
    message step in seconds. ``efficiency``: the fraction of the line rate that large NCCL
    collectives reach (nccl-tests "bus bandwidth" / line rate); an assumption, stated per preset.
    ``headline``: how the vendor quotes it, so the learner can map the marketing number to ours.
    """

    name: str
    bandwidth: float
    latency: float
    efficiency: float = 1.0
    headline: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        text("LinkSpec.name", self.name)
        positive(f"LinkSpec({self.name!r}).bandwidth", self.bandwidth)
        positive(f"LinkSpec({self.name!r}).latency", self.latency)
        fraction(f"LinkSpec({self.name!r}).efficiency", self.efficiency)
        text(f"LinkSpec({self.name!r}).headline", self.headline)
        text(f"LinkSpec({self.name!r}).source", self.source)

    @property
    def achievable(self) -> float:
        """Bytes/s a large collective really gets: bandwidth x efficiency."""
        return self.bandwidth * self.efficiency

    @property
    def gbit(self) -> float:
        """The line rate in Gb/s, one direction (how networks are quoted)."""
        return self.bandwidth / GBIT

    @property
    def gbyte(self) -> float:
        """The line rate in GB/s, one direction."""
        return self.bandwidth / GBYTE


_NVLINK_SRC = ("NVIDIA datasheets: NVLink 2/3/4 links carry 25 GB/s per direction each, NVLink 5 links 50; "
               "V100 has 6, A100 12, A800/H800 8, H100/H200/H20 18, B200/GB200 18 (NVLink 5). Efficiency 0.8: "
               "nccl-tests all_reduce bus bandwidth on an 8-GPU NVSwitch node is ~230-240 GB/s of the "
               "300 GB/s line rate (A100); DeepSeek-V3's report (Sec. 3.2.2) measures 160 GB/s of the "
               "H800's 200, the same 0.8")
_IF_SRC = ("AMD Instinct MI300X datasheet: 7 Infinity Fabric links per GPU, 128 GB/s each counting both "
           "directions (64 one way), fully connecting 8 GPUs; 448 GB/s one way over all 7, which only "
           "collectives spread over every peer reach (RCCL). Efficiency 0.7 is an assumption, not a "
           "measurement checked here")
_IB_SRC = ("InfiniBand HDR/NDR/XDR: 200/400/800 Gb/s per port per direction (one port per GPU on "
           "DGX nodes); efficiency 0.9 of line rate for large NCCL transfers")
_ETH_SRC = "IEEE 802.3 line rates; efficiency 0.9 (TCP/RoCE goodput), latency of a TCP/socket hop"
_ROCE_SRC = ("IEEE 802.3 400GBASE line rate, one 400 Gb/s RoCE v2 NIC per GPU (ConnectX-7 class, the "
             "China-market H800/H20 clusters); efficiency 0.9 and latency as InfiniBand's, an assumption")

LINKS: dict[str, LinkSpec] = {
    link.name: link
    for link in [
        LinkSpec("nvlink2-v100", gbyte_per_s(150), 2 * US, 0.8,
                 "300 GB/s (6 links x 25 GB/s x 2 directions)", _NVLINK_SRC),
        LinkSpec("nvlink3-a100", gbyte_per_s(300), 2 * US, 0.8,
                 "600 GB/s (12 links x 25 GB/s x 2 directions)", _NVLINK_SRC),
        LinkSpec("nvlink3-a800", gbyte_per_s(200), 2 * US, 0.8,
                 "400 GB/s (8 links x 25 GB/s x 2 directions; export version of the A100)", _NVLINK_SRC),
        LinkSpec("nvlink4-h100", gbyte_per_s(450), 2 * US, 0.8,
                 "900 GB/s (18 links x 25 GB/s x 2 directions)", _NVLINK_SRC),
        LinkSpec("nvlink4-h800", gbyte_per_s(200), 2 * US, 0.8,
                 "400 GB/s (8 links x 25 GB/s x 2 directions; export version of the H100)", _NVLINK_SRC),
        LinkSpec("nvlink5", gbyte_per_s(900), 2 * US, 0.8,
                 "1.8 TB/s (18 links x 50 GB/s x 2 directions; B200, GB200 NVL72)", _NVLINK_SRC),
        LinkSpec("infinity-fabric-mi300x", gbyte_per_s(448), 3 * US, 0.7,
                 "896 GB/s (7 links x 64 GB/s x 2 directions; MI300X)", _IF_SRC),
        LinkSpec("pcie3", gbyte_per_s(15.75), 3 * US, 0.75,
                 "PCIe 3.0 x16: 16 GB/s per direction (\"32 GB/s\" counting both)",
                 "PCI-SIG: 8 GT/s x 16 lanes, 128b/130b; efficiency 0.75 through the host bridge"),
        LinkSpec("pcie4", gbyte_per_s(31.5), 3 * US, 0.75,
                 "PCIe 4.0 x16: 32 GB/s per direction (\"64 GB/s\" counting both)",
                 "PCI-SIG: 16 GT/s x 16 lanes, 128b/130b; efficiency 0.75 through the host bridge"),
        LinkSpec("pcie5", gbyte_per_s(63), 3 * US, 0.75,
                 "PCIe 5.0 x16: 64 GB/s per direction (\"128 GB/s\" counting both)",
                 "PCI-SIG: 32 GT/s x 16 lanes, 128b/130b; efficiency 0.75 through the host bridge"),
        LinkSpec("10gbe", gbit_per_s(10), 30 * US, 0.9, "10 Gb/s Ethernet = 1.25 GB/s per direction", _ETH_SRC),
        LinkSpec("25gbe", gbit_per_s(25), 20 * US, 0.9, "25 Gb/s Ethernet = 3.1 GB/s per direction", _ETH_SRC),
        LinkSpec("100gbe", gbit_per_s(100), 10 * US, 0.9, "100 Gb/s Ethernet (RoCE) = 12.5 GB/s per direction",
                 _ETH_SRC),
        LinkSpec("400gbe", gbit_per_s(400), 5 * US, 0.9, "400 Gb/s Ethernet (RoCE v2) = 50 GB/s per direction",
                 _ROCE_SRC),
        LinkSpec("ib-hdr", gbit_per_s(200), 5 * US, 0.9, "InfiniBand HDR 200 Gb/s = 25 GB/s per direction",
                 _IB_SRC),
        LinkSpec("ib-ndr", gbit_per_s(400), 5 * US, 0.9, "InfiniBand NDR 400 Gb/s = 50 GB/s per direction",
                 _IB_SRC),
        LinkSpec("ib-xdr", gbit_per_s(800), 5 * US, 0.9, "800 Gb/s (InfiniBand XDR) = 100 GB/s per direction",
                 _IB_SRC),
    ]
}

_LINK_ALIASES = {"nvlink": "nvlink3-a100", "nvlink3": "nvlink3-a100", "nvlink2": "nvlink2-v100",
                 "nvlink4": "nvlink4-h100", "nvlink-a800": "nvlink3-a800", "nvlink-h800": "nvlink4-h800",
                 "nvlink5-b200": "nvlink5", "nvlink-b200": "nvlink5", "infinity-fabric": "infinity-fabric-mi300x",
                 "xgmi": "infinity-fabric-mi300x", "roce": "400gbe", "roce-400": "400gbe", "400g": "400gbe",
                 "pcie": "pcie4", "hdr": "ib-hdr", "ndr": "ib-ndr", "xdr": "ib-xdr", "ib": "ib-hdr",
                 "ib-200": "ib-hdr", "ib-400": "ib-ndr", "ib-800": "ib-xdr", "800g": "ib-xdr",
                 "10g": "10gbe", "25g": "25gbe", "100g": "100gbe"}


def get_link(name: str | LinkSpec) -> LinkSpec:
    """A link preset by name (see ``LINKS``; aliases such as nvlink, pcie, hdr, ndr, 10g), or a LinkSpec."""
    if isinstance(name, LinkSpec):
        return name
    return lookup("link", name, LINKS, _LINK_ALIASES)


def custom_link(gbit: float, latency_us: float = 10.0, efficiency: float = 0.9, name: str = "") -> LinkSpec:
    """A network link given in Gb/s (e.g. the guide's 64 Gb/s in 4.4), latency in microseconds."""
    bandwidth = gbit_per_s(gbit)
    return LinkSpec(text("name", name) or f"{gbit:g}gbit", bandwidth, positive("latency_us", latency_us) * US,
                    efficiency, f"{gbit:g} Gb/s = {human_rate(bandwidth)} per direction", "user-defined")
