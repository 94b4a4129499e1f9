"""Accelerators: GPUSpec (memory, peak dense FLOP/s by dtype, HBM bandwidth) and named presets."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.specs._check import boolean, lookup, positive, text

GiB = 2**30
GB = 1e9
TFLOPS = 1e12


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator. ``memory_bytes`` is what the card holds (an "80GB" A100 holds 80 GiB =
    85.9e9 bytes); FLOP/s are dense peaks from the vendor's datasheet (no 2:4 sparsity);
    ``half_flops`` is the fp16/bf16 tensor-core peak, ``fp32_flops`` plain fp32 (no TF32)."""

    name: str
    memory_bytes: float
    half_flops: float
    fp32_flops: float
    hbm_bytes_per_s: float
    bf16: bool = True
    source: str = ""

    def __post_init__(self) -> None:
        text("GPUSpec.name", self.name)
        for field in ("memory_bytes", "half_flops", "fp32_flops", "hbm_bytes_per_s"):
            positive(f"GPUSpec({self.name!r}).{field}", getattr(self, field))
        boolean(f"GPUSpec({self.name!r}).bf16", self.bf16)
        text(f"GPUSpec({self.name!r}).source", self.source)

    def peak_flops(self, compute_dtype: str) -> float:
        """Peak FLOP/s for ``compute_dtype`` in {'fp32', 'fp16', 'bf16', 'half'}."""
        if compute_dtype == "fp32":
            return self.fp32_flops
        if compute_dtype == "bf16" and not self.bf16:
            raise ValueError(f"{self.name} has no bf16 tensor cores; use fp16 or fp32")
        if compute_dtype in ("fp16", "bf16", "half"):
            return self.half_flops
        raise ValueError(f"unknown compute dtype {compute_dtype!r}; allowed: fp32, fp16, bf16, half")

    @property
    def memory_gb(self) -> float:
        return self.memory_bytes / GB


GPUS: dict[str, GPUSpec] = {
    g.name: g
    for g in [
        GPUSpec("v100-32gb", 32 * GiB, 125 * TFLOPS, 15.7 * TFLOPS, 900 * GB, bf16=False,
                source="NVIDIA V100 datasheet (SXM2): 125 TFLOP/s fp16 tensor, 15.7 fp32, 900 GB/s"),
        GPUSpec("a100-40gb", 40 * GiB, 312 * TFLOPS, 19.5 * TFLOPS, 1555 * GB,
                source="NVIDIA A100 datasheet (SXM4 40GB): 312 TFLOP/s bf16, 19.5 fp32, 1,555 GB/s"),
        GPUSpec("a100-80gb", 80 * GiB, 312 * TFLOPS, 19.5 * TFLOPS, 2039 * GB,
                source="NVIDIA A100 datasheet (SXM4 80GB): 312 TFLOP/s bf16, 19.5 fp32, 2,039 GB/s"),
        GPUSpec("a800-80gb", 80 * GiB, 312 * TFLOPS, 19.5 * TFLOPS, 2039 * GB,
                source="NVIDIA A800 datasheet (SXM4 80GB): A100 compute, NVLink cut to 400 GB/s"),
        GPUSpec("h100-sxm", 80 * GiB, 989 * TFLOPS, 67 * TFLOPS, 3350 * GB,
                source="NVIDIA H100 datasheet (SXM5): 989 TFLOP/s bf16 dense, 67 fp32, 3.35 TB/s"),
        GPUSpec("h200", 141 * GB, 989 * TFLOPS, 67 * TFLOPS, 4800 * GB,
                source="NVIDIA H200 datasheet (SXM): 141 GB HBM3e, 989 TFLOP/s bf16 dense, 4.8 TB/s"),
    ]
}

_GPU_ALIASES = {"v100": "v100-32gb", "a100": "a100-80gb", "a800": "a800-80gb", "h100": "h100-sxm",
                "h200-sxm": "h200"}


def get_gpu(name: str | GPUSpec) -> GPUSpec:
    """A GPU preset by name (aliases: v100, a100 = a100-80gb, a800, h100), or a GPUSpec as is."""
    if isinstance(name, GPUSpec):
        return name
    return lookup("GPU", name, GPUS, _GPU_ALIASES)
