"""One GPU, the cheaper levers first (guide 3.3): the memory of training a model on one card under
full recomputation, 8-bit optimizer states, LoRA and QLoRA, beside ZeRO-Offload, every row priced
with the cost model's own terms and allowance.

The starting point is ``estimate`` of the one-GPU plan (chapter 09's walk: 2 B/param 16-bit
weights, 4 B/param fp32 gradients as Megatron-LM and DeepSpeed's bf16 keep them, 12 B/param fp32
master weights and Adam moments, the activations of one micro-batch). Each lever then changes the
terms it touches, and the allowance ``runtime + fragmentation x (terms)`` of
``plan_memory.stage_memory`` is applied again:

- recomputation keeps one input per layer (Korthikanti et al. 2022, ``memory.activation_bytes``);
- 8-bit Adam (Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization", Sec. 2):
  both moments in one byte each, with one fp32 absmax per block of 2,048 values; the fp32 master
  weights stay (bitsandbytes' ``Adam8bit`` under mixed precision);
- LoRA (Hu et al. 2021, "LoRA", Sec. 4.1): the base weights frozen in 16 bits, no gradient or
  optimizer state for them; each adapted ``d_in x d_out`` matrix gains ``r (d_in + d_out)``
  trainable parameters (A and B), which carry the full 4 + 12 B/param of gradients and states;
- QLoRA (Dettmers et al. 2023, "QLoRA", Sec. 3): the frozen base in 4-bit NormalFloat, one absmax
  per 64 weights, double-quantized to 8 bits with one fp32 constant per 256 of them
  (``8/64 + 32/(64 x 256)`` = 0.127 bits/param), LoRA on every linear layer of the block;
- ZeRO-Offload (Ren et al. 2021): the cost model's own plan with the optimizer on the CPU.

The activations of LoRA and QLoRA are the model's activations under the same recomputation: the
backward pass must still reach the adapters of the first layer through every frozen layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parlab.costmodel.answers.phases import step_phases
from parlab.costmodel.plan.estimate import Estimate, estimate
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.specs._check import positive
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import make_cluster
from parlab.costmodel.specs.models import ModelSpec

#: bitsandbytes' block size for 8-bit optimizer states (Dettmers et al. 2022, Sec. 2.1)
INT8_BLOCK = 2048
#: QLoRA's NF4 block size and the block of its double quantization (Dettmers et al. 2023, Sec. 3)
NF4_BLOCK, NF4_DQ_BLOCK = 64, 256


def int8_adam_state_bytes(block: int = INT8_BLOCK) -> float:
    """Bytes per parameter of Adam's two moments quantized block-wise to 8 bits: one byte each plus
    one fp32 absmax per ``block`` values (Dettmers et al. 2022, Sec. 2): ``2 (1 + 4 / block)``."""
    positive("block", block, integer=True)
    return 2 * (1 + 4 / block)


def nf4_bytes(block: int = NF4_BLOCK, dq_block: int = NF4_DQ_BLOCK, double_quant: bool = True) -> float:
    """Bytes per parameter of 4-bit NormalFloat weights with their quantization constants (Dettmers
    et al. 2023, Sec. 3): 4 bits + one absmax per ``block`` weights, fp32 (32/64 = 0.5 bits) or, with
    double quantization, 8 bits plus one fp32 per ``dq_block`` absmaxes (8/64 + 32/(64 x 256))."""
    positive("block", block, integer=True)
    positive("dq_block", dq_block, integer=True)
    constants = (8 / block + 32 / (block * dq_block)) if double_quant else 32 / block
    return (4 + constants) / 8


def lora_params(model: str | ModelSpec, rank: int = 16, targets: str = "all") -> int:
    """Trainable parameters LoRA adds (Hu et al. 2021, Sec. 4.1): ``r (d_in + d_out)`` per adapted
    matrix (A: d_in x r, B: r x d_out), over every layer. ``targets``: 'attention' adapts W_q, W_k,
    W_v, W_o (h x h each: 8 r h per layer); 'all' also the MLP's matrices (h x f, as QLoRA does: two,
    or three for a gated MLP, of r (h + f) each)."""
    spec = get_model(model) if isinstance(model, str) else model
    positive("rank", rank, integer=True)
    if targets not in ("attention", "all"):
        raise ValueError(f"targets must be 'attention' or 'all', got {targets!r}")
    h, f = spec.hidden, spec.ffn_hidden or 4 * spec.hidden
    per_layer = 4 * rank * 2 * h
    if targets == "all":
        per_layer += (3 if spec.gated_mlp else 2) * rank * (h + f)
    return spec.layers * per_layer


@dataclass(frozen=True)
class Lever:
    """One way to train on one GPU: the bytes of each term of the peak phase (the allowance
    included), what it costs, and its source."""

    name: str
    terms: dict[str, float] = field(hash=False)
    trainable: float  # parameters the optimizer updates
    cost: str  # what it gives up
    source: str
    capacity: float  # bytes the GPU holds

    @property
    def total(self) -> float:
        return sum(self.terms.values())

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity


def _allowance(est: Estimate, terms: dict[str, float]) -> dict[str, float]:
    a = est.assumptions
    body = sum(terms.values())
    return {**terms, "buffers + fragmentation (allowance)": a.runtime_bytes + a.fragmentation * body}


def _peak_terms(est: Estimate) -> dict[str, float]:
    """The estimate's peak phase as the five terms this module changes (allowance taken off)."""
    t = step_phases(est).peak.terms
    return {"parameters": t["parameters"], "gradients": t["gradients"] + t["fp32 gradient copy"],
            "optimizer states": t["optimizer states"], "activations": t["activations"]}


def one_gpu_levers(model: str | ModelSpec = "llama-7b", micro_batch: int = 1, lora_rank: int = 16,
                   kind: str = "dgx-a100") -> list[Lever]:
    """The levers of guide 3.3 on one GPU of ``kind``, cheapest first: the plain fine-tune, full
    recomputation, 8-bit Adam on top, LoRA and QLoRA (rank ``lora_rank`` on every linear layer),
    and ZeRO-Offload of the optimizer. Every row but the last keeps the same micro-batch and
    recomputes fully from the second row on."""
    spec = get_model(model) if isinstance(model, str) else model
    one = make_cluster(kind, 1)
    cap = one.gpu.memory_bytes
    plain = estimate(spec, one, Plan(micro_batch=micro_batch, global_batch=micro_batch))
    full = estimate(spec, one, Plan(micro_batch=micro_batch, global_batch=micro_batch, recompute="full"))
    offl = estimate(spec, one, Plan(micro_batch=micro_batch, global_batch=micro_batch, recompute="full",
                                    zero=1, offload="optimizer"))
    n = full.stage.params
    base, recomputed = _peak_terms(plain), _peak_terms(full)
    master = 4 * n  # fp32 master weights, kept by 8-bit Adam under mixed precision
    int8 = {**recomputed, "optimizer states": master + int8_adam_state_bytes() * n}
    grad_bpp, state_bpp = recomputed["gradients"] / n, recomputed["optimizer states"] / n
    lora_n = lora_params(spec, lora_rank)
    adapters = {"gradients": grad_bpp * lora_n, "optimizer states": state_bpp * lora_n,
                "activations": recomputed["activations"]}
    lora = {"parameters": recomputed["parameters"] + 2 * lora_n, **adapters}
    qlora = {"parameters": nf4_bytes() * n + 2 * lora_n, **adapters}
    rows = [
        ("full fine-tune, mixed-precision Adam", base, n,
         "nothing: the baseline (16-bit weights, fp32 gradients, fp32 master and moments)",
         "ZeRO paper Sec. 3.1; Korthikanti et al. 2022, Table 2"),
        ("+ full recomputation", recomputed, n,
         "one more forward per step (4/3 of the FLOPs)", "Chen et al. 2016; Korthikanti et al. 2022"),
        ("+ 8-bit Adam", int8, n,
         "nothing measurable in accuracy (the paper's claim); the moments are rounded block by block",
         "Dettmers et al. 2022, Sec. 2"),
        (f"LoRA, r = {lora_rank}, all linear layers", lora, lora_n,
         "the base weights never change: a fine-tune, not pre-training", "Hu et al. 2021, Sec. 4.1"),
        (f"QLoRA (NF4 base, LoRA r = {lora_rank})", qlora, lora_n,
         "as LoRA, and every matmul dequantizes its 4-bit weights first (slower steps)",
         "Dettmers et al. 2023, Sec. 3"),
        ("ZeRO-Offload (optimizer on the CPU)", _peak_terms(offl), n,
         "the CPU's Adam step and PCIe transfers every step", "Ren et al. 2021"),
    ]
    return [Lever(name, _allowance(full, terms), trainable, cost, source, cap)
            for name, terms, trainable, cost, source in rows]


def lever_rows(levers: list[Lever]) -> tuple[list[list[object]], list[str], dict[str, str]]:
    """``(rows, headers, formats)`` for ``parlab.viz.html.show_table``, in GB."""
    gb = 1e9
    rows = [[lv.name, lv.terms["parameters"] / gb, (lv.terms["gradients"] + lv.terms["optimizer states"]) / gb,
             lv.terms["activations"] / gb, lv.total / gb, "yes" if lv.fits else "no", lv.trainable / 1e6, lv.cost]
            for lv in levers]
    headers = ["lever", "weights (GB)", "grads + optimizer (GB)", "activations (GB)", "total (GB)", "fits?",
               "trained (M params)", "what it gives up"]
    return rows, headers, {h: ",.1f" for h in headers[1:5]} | {"trained (M params)": ",.0f"}
