"""One GPU's memory phase by phase (the forward/backward pass against the optimizer step), and the
walk from the ZeRO paper's 16 bytes per parameter to the cost model's total, term by term.

The cost model's memory of a GPU (``plan_memory.StageMemory.total``) is the peak of two moments:

* **forward/backward**: weights, gradients, optimizer states and the activations kept for the
  backward pass (Korthikanti et al. 2022, Table 2), all counted at once (the activations are
  freed layer by layer as the gradients fill in, so this bounds the pass from above);
* **optimizer step**: the activations are gone, and with 16-bit gradients the update makes a
  transient fp32 copy of them (``plan_memory.fp32_gradient_copy``: DeepSpeed's ZeRO optimizers,
  Megatron-LM's fp16 optimizer).

Both carry the same allowance (``Assumptions``): a fixed runtime reserve (CUDA context, NCCL,
DDP's gradient buckets) plus a share for allocator fragmentation. The larger phase is the GPU's
memory, so recomputation, which shrinks only the activations, lowers the peak only while the
forward/backward phase is the larger one. Nothing here is a new formula: the terms are the
estimate's, regrouped by the moment they are live, and the test checks the peak equals
``estimate(...).memory_total``.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.plan.estimate import Estimate, estimate
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.pricing.memory import model_state_memory
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import make_cluster
from parlab.costmodel.specs.hardware import GPUSpec, get_gpu
from parlab.costmodel.specs.models import ModelSpec

FORWARD_BACKWARD = "forward/backward"
OPTIMIZER_STEP = "optimizer step"

#: the terms of a phase, in the order a table shows them
TERMS = ("parameters", "gradients", "optimizer states", "activations", "fp32 gradient copy",
         "runtime buffers", "fragmentation")


def term_labels(est: Estimate) -> dict[str, str]:
    """What each term of ``TERMS`` is, for this plan, in a few words (a table's second column)."""
    p, a = est.plan, est.assumptions
    weight = "fp32" if p.dtype == "fp32" else "16-bit"
    grads = ("fp32" if p.dtype == "fp32" or p.fp32_grads else "16-bit") + " gradients, held through the step"
    if p.offload != "none" and p.zero >= 2:
        grads = "none on the GPU: each reduced shard goes to the host (ZeRO-Offload)"
    optimizer = ("fp32 master weights + Adam's two moments (12 B/param)" if p.dtype != "fp32"
                 else "Adam's two fp32 moments (8 B/param)")
    if p.offload != "none":
        optimizer = "none on the GPU: master weights and moments are on the host"
    return {
        "parameters": f"{weight} working weights" + (", shard + gathered units (ZeRO-3)" if p.zero == 3 else ""),
        "gradients": grads,
        "optimizer states": optimizer + (f", 1/{p.dp} shard (ZeRO-{p.zero})" if p.zero and p.dp > 1 else ""),
        "activations": f"kept for the backward pass, recompute={p.recompute} (Korthikanti Table 2)",
        "fp32 gradient copy": "4 B/param the update makes from 16-bit gradients, only during the step",
        "runtime buffers": "fixed reserve: CUDA context, NCCL, DDP gradient buckets",
        "fragmentation": f"{a.fragmentation:.0%} of the terms above (allocator)",
    }


@dataclass(frozen=True)
class Phase:
    """Bytes on one GPU while one phase of the step runs, by term (``TERMS``)."""

    name: str
    terms: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.terms.values())


@dataclass(frozen=True)
class StepPhases:
    """The forward/backward phase and the optimizer step of one plan; ``peak`` is the larger."""

    estimate: Estimate
    forward_backward: Phase
    optimizer_step: Phase

    @property
    def phases(self) -> tuple[Phase, Phase]:
        return self.forward_backward, self.optimizer_step

    @property
    def peak(self) -> Phase:
        return max(self.phases, key=lambda ph: ph.total)

    @property
    def total(self) -> float:
        return self.peak.total

    def why(self) -> str:
        """One sentence: which phase sets the peak and the term that decides it."""
        fb, step = self.forward_backward.terms, self.optimizer_step.terms
        acts, copy = fb["activations"], step["fp32 gradient copy"]
        gb = 1e9
        if self.peak is self.optimizer_step:
            return (f"The optimizer step sets the peak: its fp32 gradient copy ({copy / gb:.1f} GB) is larger than "
                    f"the activations it replaces ({acts / gb:.1f} GB), so recomputation, which shrinks only the "
                    "activations, cannot bring the total below this phase.")
        if copy:
            return (f"The forward/backward pass sets the peak: its activations ({acts / gb:.1f} GB) outweigh the "
                    f"step's fp32 gradient copy ({copy / gb:.1f} GB), so recomputation lowers the total.")
        return (f"The forward/backward pass sets the peak: the step adds nothing once the activations "
                f"({acts / gb:.1f} GB) are freed, so recomputation lowers the total.")


def step_phases(est: Estimate) -> StepPhases:
    """The two phases of ``est``'s most loaded GPU (``StepPhases``): the same terms as
    ``Estimate.memory_terms``, each in the phase where it is live, each phase with the allowance
    ``runtime + fragmentation x (its terms)`` (``plan_memory.stage_memory``)."""
    st, a = est.stage, est.assumptions
    common = {"parameters": st.weights, "gradients": st.grads, "optimizer states": st.optimizer}

    def phase(name: str, activations: float, copy: float) -> Phase:
        terms = {**common, "activations": activations, "fp32 gradient copy": copy}
        body = sum(terms.values())
        return Phase(name, {**terms, "runtime buffers": a.runtime_bytes, "fragmentation": a.fragmentation * body})

    return StepPhases(est, phase(FORWARD_BACKWARD, st.activations.total, 0.0),
                      phase(OPTIMIZER_STEP, 0.0, st.step_grads))


# -- the walk: 16 B/param -> the cost model's total ------------------------------------------------
@dataclass(frozen=True)
class WalkRow:
    """One step of ``one_gpu_walk``: what is added, why, and the running total (bytes)."""

    term: str
    what: str
    added: float
    total: float
    seen: str = ""  # the chapters that print this running total


def one_gpu_walk(model: str | ModelSpec = "llama-7b", micro_batch: int = 1, recompute: str = "none",
                 gpu: str | GPUSpec = "a100-80gb", **plan: object) -> list[WalkRow]:
    """From the ZeRO paper's model states (2 + 2 + 12 B/param, Rajbhandari et al. 2020, Sec. 3.1:
    chapters 00 and 01) to the cost model's memory of one GPU training ``model`` with plain data
    parallelism on one GPU (chapters 06, 09, 11), one term at a time:

    1. the model states, 16 B/param;
    2. the activations of one micro-batch (Korthikanti et al. 2022, Table 2, + the embedding and
       logits ends): ``walls.memory_wall``'s total (chapter 01);
    3. the gradients as the plan keeps them beyond 2 bytes (fp32: + 2 B/param): now the running
       total is the forward/backward phase;
    4. what the optimizer step's fp32 gradient copy adds above that phase (``StepPhases``);
    5. the runtime reserve (CUDA context, NCCL, DDP buckets) and 6. the fragmentation share.

    The last row's total is ``estimate(...).memory_total``. ``plan`` passes other ``Plan`` fields
    (``dtype``, ``fp32_grads``, ``optimizer``) for the one-GPU plan; sharding and offload are not a
    walk from one GPU's states and are refused.
    """
    spec = get_model(model) if isinstance(model, str) else model
    p = Plan(micro_batch=micro_batch, recompute=recompute, **plan)
    if p.n_gpus != 1 or p.offload != "none":
        raise ValueError(f"one_gpu_walk is for one GPU without offload, got {p.describe()} offload={p.offload}")
    est = estimate(spec, make_cluster("dgx-a100", 1, gpu=gpu), p)
    ph = step_phases(est)
    st, a = est.stage, est.assumptions
    paper = model_state_memory(st.params, "mixed" if p.dtype != "fp32" else "fp32", p.optimizer)
    fb = ph.forward_backward.terms
    kept = fb["parameters"] + fb["gradients"] + fb["optimizer states"]
    grads_delta = kept - paper.total
    step_extra = max(0.0, ph.optimizer_step.terms["fp32 gradient copy"] - fb["activations"])
    frag = a.fragmentation * (ph.peak.total - a.runtime_bytes) / (1 + a.fragmentation)
    bpp = paper.total / st.params
    rows = [("model states", f"ZeRO paper's {bpp:.0f} B/param (2 + 2 + 12)", paper.total),
            ("activations", f"b = {p.micro_batch}, s = {spec.seq_len}, recompute {p.recompute}", fb["activations"]),
            ("fp32 gradients" if grads_delta else "gradients",
             f"+{grads_delta / st.params:.0f} B/param: Megatron main_grad, DeepSpeed bf16"
             if grads_delta else "16-bit as the ZeRO paper: nothing to add", grads_delta),
            ("optimizer step", "fp32 gradient copy above the freed activations"
             if step_extra else "adds nothing: below the forward/backward peak", step_extra),
            ("runtime buffers", "CUDA context, NCCL, DDP gradient buckets", a.runtime_bytes),
            ("fragmentation", f"{a.fragmentation:.0%} of the peak phase's terms", frag)]
    seen = {"model states": "00, 01", "activations": "01", "fragmentation": "06, 09, 11"}
    out, running = [], 0.0
    for term, what, added in rows:
        running += added
        out.append(WalkRow(term, what, added, running, seen.get(term, "")))
    return out


@dataclass(frozen=True)
class OneGpuFit:
    """Does full training fit one GPU: ``one_gpu_walk``'s last running total (the estimate's memory,
    every term counted) against the card's bytes. The one answer the course gives (chapters 09, 10
    and the drill's ``fits-one-gpu``)."""

    walk: tuple[WalkRow, ...]
    capacity: float
    dtype: str
    fp32_grads: bool

    @property
    def total(self) -> float:
        return self.walk[-1].total

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    def added(self, term: str) -> float:
        """Bytes the walk's row ``term`` adds (0 for a row the plan does not have)."""
        return sum(r.added for r in self.walk if r.term == term)


def one_gpu_fit(model: str | ModelSpec, gpu: str | GPUSpec = "a100-80gb", micro_batch: int = 1,
                recompute: str = "none", **plan: object) -> OneGpuFit:
    """``one_gpu_walk`` of ``model`` on one ``gpu`` and whether its total fits the card. The 16-bit
    type is bf16 where the card has bf16 tensor cores and fp16 (with loss scaling) where it has not
    (V100), unless ``plan`` names a ``dtype``."""
    g = get_gpu(gpu)
    dtype = str(plan.pop("dtype", "bf16" if g.bf16 else "fp16"))
    walk = one_gpu_walk(model, micro_batch, recompute, g, dtype=dtype, **plan)
    return OneGpuFit(tuple(walk), g.memory_bytes, dtype, Plan(dtype=dtype, **plan).fp32_grads)


def walk_table(rows: list[WalkRow]) -> tuple[list[list], list[str], dict]:
    """``(rows, headers, formats)`` of a walk for ``parlab.viz.html.show_table``, in GB."""
    return ([[r.term, r.what, r.added / 1e9, r.total / 1e9, r.seen] for r in rows],
            ["term", "what it is", "adds (GB)", "running total (GB)", "chapters"],
            {"adds (GB)": "+,.1f", "running total (GB)": ",.1f"})
