"""Accelerators: GPUSpec (memory, peak dense FLOP/s by dtype, HBM bandwidth) and named presets."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.specs._check import boolean, lookup, non_negative, positive, text

GiB = 2**30
GB = 1e9
TFLOPS = 1e12


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator. ``memory_bytes`` is what the card holds (an "80GB" A100 holds 80 GiB =
    85.9e9 bytes); FLOP/s are dense peaks from the vendor's datasheet (no 2:4 sparsity: a
    datasheet's "with sparsity" figure is halved); ``half_flops`` is the fp16/bf16 tensor-core
    peak with fp32 accumulation, ``fp32_flops`` plain fp32 (no TF32), ``fp8_flops`` the FP8
    tensor-core peak (0: no FP8 tensor cores, as on Ampere and older: FP8 arrived with Hopper and
    Ada, NVIDIA H100 and Ada whitepapers), ``mxfp8`` whether its tensor cores take MXFP8's
    1x32-block scales (Blackwell: OCP Microscaling Formats spec v1.0; NVIDIA Blackwell
    whitepaper). ``intra`` names the GPU's own intra-node link preset (``specs.links``): its
    NVLink generation, or PCIe for a card without NVLink; ``make_cluster`` uses it."""

    name: str
    memory_bytes: float
    half_flops: float
    fp32_flops: float
    hbm_bytes_per_s: float
    bf16: bool = True
    source: str = ""
    fp8_flops: float = 0.0
    mxfp8: bool = False
    intra: str = ""

    def __post_init__(self) -> None:
        text("GPUSpec.name", self.name)
        for field in ("memory_bytes", "half_flops", "fp32_flops", "hbm_bytes_per_s"):
            positive(f"GPUSpec({self.name!r}).{field}", getattr(self, field))
        boolean(f"GPUSpec({self.name!r}).bf16", self.bf16)
        text(f"GPUSpec({self.name!r}).source", self.source)
        non_negative(f"GPUSpec({self.name!r}).fp8_flops", self.fp8_flops)
        boolean(f"GPUSpec({self.name!r}).mxfp8", self.mxfp8)
        text(f"GPUSpec({self.name!r}).intra", self.intra)
        if self.mxfp8 and not self.fp8_flops:
            raise ValueError(f"GPUSpec({self.name!r}): mxfp8=True needs FP8 tensor cores (fp8_flops > 0)")

    def peak_flops(self, compute_dtype: str) -> float:
        """Peak FLOP/s for ``compute_dtype`` in {'fp32', 'fp16', 'bf16', 'half', 'fp8', 'mxfp8'}."""
        if compute_dtype == "fp32":
            return self.fp32_flops
        if compute_dtype == "bf16" and not self.bf16:
            raise ValueError(f"{self.name} has no bf16 tensor cores; use fp16 or fp32")
        if compute_dtype in ("fp16", "bf16", "half"):
            return self.half_flops
        if compute_dtype in ("fp8", "mxfp8"):
            self.check_fp8(compute_dtype == "mxfp8")
            return self.fp8_flops
        raise ValueError(f"unknown compute dtype {compute_dtype!r}; allowed: fp32, fp16, bf16, half, fp8, mxfp8")

    def check_fp8(self, mx: bool = False) -> None:
        """A ValueError naming the GPU if it has no FP8 tensor cores (or, ``mx``, no MXFP8 ones)."""
        if not self.fp8_flops:
            raise ValueError(f"{self.name} has no FP8 tensor cores (FP8 needs Hopper, Ada or Blackwell, or an "
                             f"MI300X: `parlab gpus` lists each GPU's fp8 peak); use dtype bf16")
        if mx and not self.mxfp8:
            raise ValueError(f"{self.name} has no MXFP8 tensor cores (1x32-block scales need Blackwell: b200, "
                             f"gb200); use another FP8 recipe (te-delayed, te-current, deepseek-blockwise)")

    @property
    def memory_gb(self) -> float:
        return self.memory_bytes / GB


TB = 1e12  # HBM bandwidths are quoted in TB/s = 1e12 bytes/s

_UNVERIFIED = "no NVIDIA datasheet for it is public; figures as reported by the trade press, not verified here"

GPUS: dict[str, GPUSpec] = {
    g.name: g
    for g in [
        GPUSpec("v100-32gb", 32 * GiB, 125 * TFLOPS, 15.7 * TFLOPS, 900 * GB, bf16=False, intra="nvlink2-v100",
                source="NVIDIA V100 datasheet (SXM2): 125 TFLOP/s fp16 tensor, 15.7 fp32, 900 GB/s; no FP8"),
        GPUSpec("a100-40gb", 40 * GiB, 312 * TFLOPS, 19.5 * TFLOPS, 1555 * GB, intra="nvlink3-a100",
                source="NVIDIA A100 datasheet (SXM4 40GB): 312 TFLOP/s bf16, 19.5 fp32, 1,555 GB/s; no FP8"),
        GPUSpec("a100-80gb", 80 * GiB, 312 * TFLOPS, 19.5 * TFLOPS, 2039 * GB, intra="nvlink3-a100",
                source="NVIDIA A100 datasheet (SXM4 80GB): 312 TFLOP/s bf16, 19.5 fp32, 2,039 GB/s; no FP8"),
        GPUSpec("a800-80gb", 80 * GiB, 312 * TFLOPS, 19.5 * TFLOPS, 2039 * GB, intra="nvlink3-a800",
                source="NVIDIA A800 datasheet (SXM4 80GB): A100 compute (312 TFLOP/s bf16, 19.5 fp32), "
                       "2,039 GB/s, NVLink cut to 400 GB/s; no FP8"),
        GPUSpec("h100-sxm", 80 * GiB, 989 * TFLOPS, 67 * TFLOPS, 3350 * GB, fp8_flops=1979 * TFLOPS,
                intra="nvlink4-h100",
                source="NVIDIA H100 datasheet (SXM5): 989 TFLOP/s bf16 dense, 1,979 fp8 dense (3,958 with "
                       "sparsity), 67 fp32, 3.35 TB/s, NVLink 900 GB/s"),
        GPUSpec("h800", 80 * GiB, 989 * TFLOPS, 67 * TFLOPS, 3350 * GB, fp8_flops=1979 * TFLOPS,
                intra="nvlink4-h800",
                source="NVIDIA H800 SXM5 (export H100): H100 SXM5 compute (989 TFLOP/s bf16 dense, 1,979 fp8 "
                       "dense, 67 fp32), 80 GB HBM3 at 3.35 TB/s, NVLink cut to 400 GB/s (DeepSeek-V3 report, "
                       f"Sec. 3.2.2: 160 GB/s achieved); {_UNVERIFIED}"),
        GPUSpec("h20", 96 * GiB, 148 * TFLOPS, 44 * TFLOPS, 4000 * GB, fp8_flops=296 * TFLOPS,
                intra="nvlink4-h100",
                source="NVIDIA H20 (Hopper for China): 148 TFLOP/s bf16 dense, 296 fp8 dense, 44 fp32, 96 GB "
                       f"HBM3 at 4 TB/s, NVLink 900 GB/s; {_UNVERIFIED}"),
        GPUSpec("h200", 141 * GB, 989 * TFLOPS, 67 * TFLOPS, 4800 * GB, fp8_flops=1979 * TFLOPS,
                intra="nvlink4-h100",
                source="NVIDIA H200 datasheet (SXM): 141 GB HBM3e, 989 TFLOP/s bf16 dense, 1,979 fp8 dense "
                       "(3,958 with sparsity), 67 fp32, 4.8 TB/s, NVLink 900 GB/s"),
        GPUSpec("b200", 180 * GB, 2250 * TFLOPS, 75 * TFLOPS, 8 * TB, fp8_flops=4500 * TFLOPS, mxfp8=True,
                intra="nvlink5",
                source="NVIDIA HGX B200 datasheet, per GPU (the 8-GPU board / 8): 36 PFLOP/s bf16 and 72 fp8 "
                       "with sparsity -> 2,250 and 4,500 TFLOP/s dense; 600 TFLOP/s fp32 -> 75; 1.44 TB "
                       "-> 180 GB HBM3e at 64 / 8 = 8 TB/s; NVLink 5 1.8 TB/s; MXFP8 at the fp8 rate"),
        GPUSpec("gb200", 186 * GB, 2500 * TFLOPS, 80 * TFLOPS, 8 * TB, fp8_flops=5000 * TFLOPS, mxfp8=True,
                intra="nvlink5",
                source="NVIDIA GB200 NVL72 datasheet, per GPU (the rack / 72): 360 PFLOP/s bf16 and 720 fp8 "
                       "with sparsity -> 2,500 and 5,000 TFLOP/s dense; 5,760 TFLOP/s fp32 -> 80; "
                       "13.4 TB -> 186 GB HBM3e at 576 / 72 = 8 TB/s; NVLink 5 1.8 TB/s, 72 GPUs in one "
                       "NVLink domain; MXFP8 at the fp8 rate"),
        GPUSpec("mi300x", 192 * GiB, 1307.4 * TFLOPS, 163.4 * TFLOPS, 5300 * GB, fp8_flops=2614.9 * TFLOPS,
                intra="infinity-fabric-mi300x",
                source="AMD Instinct MI300X datasheet (OAM): 1,307.4 TFLOP/s bf16 dense (2,614.9 with "
                       "sparsity), 2,614.9 fp8 dense, 163.4 fp32 matrix, 192 GB HBM3 at 5.3 TB/s, 7 Infinity "
                       "Fabric links of 128 GB/s (both directions)"),
        GPUSpec("l40s", 48 * GiB, 362.05 * TFLOPS, 91.6 * TFLOPS, 864 * GB, fp8_flops=733 * TFLOPS,
                intra="pcie4",
                source="NVIDIA L40S datasheet (PCIe, Ada): 362.05 TFLOP/s bf16 dense (733 with sparsity), "
                       "733 fp8 dense, 91.6 fp32, 48 GB GDDR6 at 864 GB/s; PCIe 4.0 x16, no NVLink"),
        GPUSpec("rtx4090", 24 * GiB, 165.2 * TFLOPS, 82.6 * TFLOPS, 1008 * GB, fp8_flops=330.3 * TFLOPS,
                intra="pcie4",
                source="NVIDIA Ada Lovelace architecture whitepaper, GeForce RTX 4090 (PCIe): 165.2 TFLOP/s "
                       "bf16 and 330.3 fp8 dense with fp32 accumulate (twice that with fp16 accumulate, "
                       "which training does not use), 82.6 fp32, 24 GB GDDR6X at 1,008 GB/s; PCIe 4.0 x16, "
                       "no NVLink"),
        GPUSpec("a10", 24 * GiB, 125 * TFLOPS, 31.2 * TFLOPS, 600 * GB, intra="pcie4",
                source="NVIDIA A10 datasheet (PCIe, Ampere): 125 TFLOP/s bf16 dense (250 with sparsity), "
                       "31.2 fp32, 24 GB GDDR6 at 600 GB/s; PCIe 4.0 x16, no NVLink; no FP8"),
    ]
}

_GPU_ALIASES = {"v100": "v100-32gb", "a100": "a100-80gb", "a800": "a800-80gb", "h100": "h100-sxm",
                "h200-sxm": "h200", "h800-sxm": "h800", "b200-sxm": "b200", "gb200-nvl72": "gb200",
                "4090": "rtx4090", "rtx-4090": "rtx4090", "l40": "l40s", "mi300": "mi300x"}

def get_gpu(name: str | GPUSpec) -> GPUSpec:
    """A GPU preset by name (aliases: v100, a100 = a100-80gb, a800, h100, 4090, ...), or a GPUSpec as is."""
    if isinstance(name, GPUSpec):
        return name
    return lookup("GPU", name, GPUS, _GPU_ALIASES)
