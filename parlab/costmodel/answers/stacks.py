"""Guide 3.2, choosing a technology stack: what each stack gives and who trains on it, with the
throughput the papers print (``parlab/data/stack_runs.csv``, Megatron-LM's Table 1 and MT-NLG's
measurements read from their own data files). Data only: the layers of each stack are
``frameworks.STACKS``, the kinds of parallelism each library provides ``frameworks.FRAMEWORKS``."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.data import read_csv


@dataclass(frozen=True)
class StackRun:
    """One published run on one stack: ``figure`` in ``unit`` as the paper prints it."""

    stack: str
    run: str
    accelerator: str
    count: int
    figure: float
    unit: str
    source: str


def stack_runs() -> list[StackRun]:
    """The runs of guide 3.2's table, largest-scale library first: Megatron-LM's own 1T run
    (Narayanan et al. 2021, Table 1, its largest row), MT-NLG 530B on Megatron-DeepSpeed (Smith et
    al. 2022, Sec. 2.4, its smallest cluster), then ``stack_runs.csv``."""
    t1 = max(read_csv("megatron2021_weak_scaling"), key=lambda r: float(r["params_b"]))
    mt = min(read_csv("mtnlg2022_throughput"), key=lambda r: int(r["gpus"]))
    out = [StackRun("Megatron-LM", f"GPT {float(t1['params_b']):g}B (TP {t1['tp']} x PP {t1['pp']} x DP)",
                    "A100 80GB", int(t1["gpus"]), float(t1["tflops_per_gpu"]), "TFLOP/s per GPU",
                    "Narayanan et al. 2021, Table 1"),
           StackRun("Megatron-DeepSpeed", "MT-NLG 530B (TP 8 x PP 35 x DP)", "A100 80GB", int(mt["gpus"]),
                    float(mt["tflops_per_gpu"]), "TFLOP/s per GPU", "Smith et al. 2022 (MT-NLG), Sec. 2.4")]
    out += [StackRun(r["stack"], r["run"], r["accelerator"], int(r["count"]), float(r["figure"]), r["unit"],
                     r["source"]) for r in read_csv("stack_runs")]
    return out


#: what each library gives, and what it asks in return (guide 3.2's trade-off), one line each
GIVES: dict[str, tuple[str, str]] = {
    "Megatron-LM / Megatron-Core": ("the fastest TP, SP, CP and interleaved PP for GPT-style models, fused kernels",
                                    "the model written its way (its own layers), NVIDIA GPUs"),
    "DeepSpeed": ("ZeRO 1-3, offload to CPU/NVMe, a pipeline engine, a JSON config around any PyTorch model",
                  "less speed than Megatron at the largest scale unless paired with it (Megatron-DeepSpeed)"),
    "PyTorch FSDP / torchtitan": ("sharding inside PyTorch itself (FSDP2 on DTensor), TP, PP and CP composed, "
                                  "torch.compile", "younger 4D tooling; TP/PP need the model's layers annotated"),
    "Colossal-AI": ("2D/2.5D/3D TP, Gemini heterogeneous memory, a single launcher for many strategies",
                    "a smaller user base and fewer published large runs than the others"),
    "JAX / XLA (TPU)": ("one program sharded by annotations (GSPMD), the compiler places the collectives",
                        "TPUs in Google's cloud; a different ecosystem from PyTorch's"),
}


def stack_rows() -> tuple[list[list[object]], list[str]]:
    """(rows, headers) of the runs: stack, run, accelerators, figure with its unit, source."""
    rows = [[r.stack, r.run, f"{r.count:,} x {r.accelerator}", f"{r.figure:g} {r.unit}", r.source]
            for r in stack_runs()]
    return rows, ["stack", "published run", "accelerators", "throughput", "source"]


def gives_rows() -> tuple[list[list[object]], list[str]]:
    """(rows, headers): what each library gives and what it asks in return."""
    return [[k, g, a] for k, (g, a) in GIVES.items()], ["library", "gives", "asks in return"]
