"""The few numbers the cost model cannot derive from a datasheet, stated once, with why.

One set of defaults serves every GPU and every row of every validation table: nothing is tuned
per row, but two of these numbers were set globally on published rows (``matmul_efficiency`` on
Megatron-LM 2021 Table 1, ``zero3_overlap`` on the ZeRO-3 rows of its Table 2). Which rows each
number was set on, and how, is the calibration table ``specs.calibration.CALIBRATION``; those rows
are in-sample, and every verdict band comes from the others. ``Assumptions`` is frozen; change a
value with ``DEFAULT.with_(matmul_efficiency=0.6)``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from parlab.costmodel.specs._check import boolean, fraction, non_negative, positive, unit_interval
from parlab.costmodel.specs.hardware import GB


@dataclass(frozen=True)
class Assumptions:
    """What the model assumes about kernels, overlap and memory overheads.

    matmul_efficiency
        Fraction of the GPU's peak FLOP/s that the transformer's matmuls reach on average. Large
        bf16 GEMMs run at 80-90% of peak on an A100 (cuBLAS); the batched attention matmuls with
        head sizes of 64-160 run lower. 0.7 was chosen so that, with the elementwise term below,
        the model reproduces Megatron-LM 2021 Table 1 (``validation.megatron_table1``): those ten
        rows are calibration, not validation (``specs.calibration``).
    hbm_efficiency
        Fraction of HBM bandwidth that elementwise kernels (LayerNorm, softmax, dropout, GeLU,
        bias-add) reach. They are memory-bound (roofline: Williams et al. 2009).
    elementwise_traffic
        Bytes those kernels move per byte of stored activation (Korthikanti et al. 2022,
        Table 2) in one forward pass: each tensor is written by one kernel and read by the next
        (2). The backward pass moves twice that; recomputation repeats the forward.
    dp_overlap
        The data-parallel gradient reduction runs in buckets during the backward pass of the
        last micro-batch (PyTorch DDP, Li et al. 2020); ZeRO-2/3 reduce-scatter during every
        backward, and ZeRO-3 prefetches the next parameter group during compute (DeepSpeed,
        FSDP). Only the communication longer than the compute it hides behind is exposed.
    tp_overlap, pp_overlap
        Fractions of TP collectives and pipeline sends hidden behind compute. 0: in Megatron-LM
        2021 (the runs we validate against) both sit on the critical path.
    runtime_bytes
        Fixed memory per GPU outside the model: CUDA context, cuBLAS and NCCL workspaces and
        communication buckets (about 1 GB on an A100 with PyTorch + NCCL).
    fragmentation
        The caching allocator reserves more than it hands out; this fraction of the other terms
        is added as an allowance (PyTorch's reserved vs allocated memory is typically 5-15% apart).
    optimizer_traffic
        Bytes of HBM read + written per parameter by the optimizer step (fused Adam in mixed
        precision: read fp32 master, m, v and the gradient, write master, m, v and the 16-bit
        weight: about 32 B).
    cpu_adam_params_per_s
        Parameters per second that the CPU optimizer of ZeRO-Offload updates for one GPU
        (Ren et al. 2021 report about 1B params/s for a multi-core CPU-Adam).
    zero3_overlap
        Of the time a ZeRO-3 collective runs beside compute, the fraction that is really hidden
        (``step_time.zero3_exposed``). 1 would be perfect prefetching; the gathers and the matmuls
        share the SMs, the HBM and the one host thread that issues both, and a gather can hide
        only behind its own neighbouring group's compute. 0.5 was chosen on the six ZeRO-3 rows of
        Narayanan et al. 2021, Table 2, the same rows as the fitted one-port cap
        (``step_time.zero3_bandwidth``): with both they land within 7% (``validation.megatron_zero3``),
        with 1 they would be 20-35% high. Those rows are calibration (``specs.calibration``).
    fp8_matmul_efficiency
        Fraction of the GPU's FP8 peak that an FP8 plan's linear-layer GEMMs reach (the GEMMs each
        ``FP8Recipe`` runs in FP8; the rest of the matmuls keep ``matmul_efficiency`` at the bf16
        peak). An assumption set on no published row: no FP8 run is fitted yet. 0.5 makes an H100's
        FP8 GEMMs 1.43x as fast as its bf16 ones (0.5 x 1,979 against 0.7 x 989 TFLOP/s), short of
        the 2x of the peaks: the casts to FP8, the amax reductions and (blockwise) the FP32
        promotions every 128 elements are not priced apart and are taken to live in this factor.
    """

    matmul_efficiency: float = 0.70
    hbm_efficiency: float = 0.80
    elementwise_traffic: float = 2.0
    dp_overlap: bool = True
    tp_overlap: float = 0.0
    pp_overlap: float = 0.0
    runtime_bytes: float = 1.0 * GB
    fragmentation: float = 0.10
    optimizer_traffic: float = 32.0
    cpu_adam_params_per_s: float = 1e9
    zero3_overlap: float = 0.5
    fp8_matmul_efficiency: float = 0.5

    def __post_init__(self) -> None:
        for name in ("matmul_efficiency", "hbm_efficiency", "fp8_matmul_efficiency"):
            fraction(f"Assumptions.{name}", getattr(self, name))
        for name in ("tp_overlap", "pp_overlap", "fragmentation"):
            unit_interval(f"Assumptions.{name}", getattr(self, name))
        boolean("Assumptions.dp_overlap", self.dp_overlap)
        for name in ("elementwise_traffic", "runtime_bytes", "optimizer_traffic"):
            non_negative(f"Assumptions.{name}", getattr(self, name))
        positive("Assumptions.cpu_adam_params_per_s", self.cpu_adam_params_per_s)
        unit_interval("Assumptions.zero3_overlap", self.zero3_overlap)

    def with_(self, **changes) -> Assumptions:
        """A copy with some values changed (checked again; an unknown name is a TypeError)."""
        return replace(self, **changes)

    def describe(self) -> list[str]:
        """One line per assumption, for ``Estimate.explain``."""
        return [f"{f.name} = {v}" if isinstance(v := getattr(self, f.name), bool) else f"{f.name} = {v:g}"
                for f in fields(self)]


DEFAULT = Assumptions()
