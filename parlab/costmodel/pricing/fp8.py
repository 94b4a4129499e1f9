"""FP8 training priced from its recipe (``specs.fp8``): the FLOPs that run in FP8, the bytes of the
FP8 weight copies and scales, and the bytes of an FP8 parameter all-gather.

What is not priced apart (each an upper or lower bound, said where it applies): the casts to FP8
and the amax reductions (their time lives in ``Assumptions.fp8_matmul_efficiency``); the
activations a linear layer saves in FP8 for its backward (TE saves its FP8 input), which the
activation count keeps at 16 bits, so an FP8 plan's activations are an upper bound; FP8 attention
(TE's ``fp8_dpa``), which no recipe here turns on.
"""

from __future__ import annotations

from parlab.costmodel.pricing.params import layer_params_per_gpu, stage_layers, stage_params
from parlab.costmodel.specs.fp8 import FP8Recipe
from parlab.costmodel.specs.models import ModelSpec

#: linear GEMM modules of one transformer layer as TE builds it: QKV, attention output, MLP in
#: (the gate and up projections fused), MLP out (``te.TransformerLayer``)
GEMMS_PER_LAYER = 4


def attention_core_flops(model: ModelSpec, micro_batch: int = 1, tp: int = 1, cp: int = 1) -> float:
    """Forward FLOPs of one layer's attention scores Q K^T and their product with V on one GPU,
    4 b s^2 h / (t cp) (Narayanan et al. 2021, Sec. 5.1; each CP rank's s / cp queries against all
    s keys): the matmuls every FP8 recipe here keeps in BF16 (TE's ``DotProductAttention`` without
    ``fp8_dpa``; DeepSeek-V3 report, Sec. 3.3.1: "attention operators")."""
    s = model.seq_len
    return 4 * micro_batch * s * s * model.hidden / (tp * cp)


def fp8_gemm_flops(layers_flops: float, layers: int, core: float, passes: int) -> float:
    """FLOPs of one micro-batch that run in FP8: the forward, input-gradient and weight-gradient
    GEMMs of every linear layer (``passes`` forward times: 3, or 4 with the full recompute, whose
    re-run forward is FP8 too), i.e. the layers' forward matmul FLOPs ``layers_flops`` less their
    attention cores (``layers`` x ``core``). The logits, the attention cores, the selective and
    FlashAttention recomputes of the scores stay in BF16 (TE's default recipe; DeepSeek-V3 report,
    Sec. 3.3.1: "the output head"). An MoE layer's router GEMM, which DeepSeek-V3 keeps in BF16,
    is counted in FP8 (2 h E FLOPs per token: under 1% of a layer's)."""
    return passes * max(0.0, layers_flops - layers * core)


def stage_linear_params(model: ModelSpec, params: float, tp: int, pp: int, stage: str | int,
                        layout: tuple[int, ...] | None = None) -> float:
    """Of the ``params`` one GPU of the 'first' or 'last' stage holds, those of its layers' linear
    weights: all but the ends (embedding, output layer: ``params.stage_params``), which FP8 recipes
    keep in BF16. The layers' norms (a few h per layer, under 0.1%) are counted with the linears."""
    ends = (stage_params(model, tp, pp, stage, layout)
            - stage_layers(model, pp, layout, stage) * layer_params_per_gpu(model, tp))
    return max(0.0, params - ends)


def fp8_weight_bytes(linear_params: float, layers: int, recipe: FP8Recipe) -> float:
    """Bytes an FP8 recipe keeps beside the BF16 weights of ``linear_params`` linear-layer
    parameters on ``layers`` layers: the FP8 copies and their block scales
    (``FP8Recipe.weight_bytes_per_param``: 2 B per parameter, the weight and its transpose, plus
    4 B per 128 x 128 block for DeepSeek-V3's fine-grained recipe, report Sec. 3.3.2, or 1 B per 32
    elements for MXFP8), and the per-tensor scales and amax histories (``tensor_scale_bytes``)."""
    return (linear_params * recipe.weight_bytes_per_param()
            + recipe.tensor_scale_bytes(layers * GEMMS_PER_LAYER))


def fp8_gather_bytes(params: float, linear_params: float, weight_bytes: float, recipe: FP8Recipe,
                     fsdp: bool) -> float:
    """Bytes of one all-gather of ``params`` parameters held at ``weight_bytes`` each: FSDP2 with
    an FP8 recipe that gathers in float8 (torchao's ``enable_fsdp_float8_all_gather``, per-tensor
    scales) sends the ``linear_params`` at 1 B, half of bf16's 2 B, the rest as they are;
    DeepSpeed's stage 3 and the block-scaled recipes gather the 16-bit weights."""
    if not (fsdp and recipe.fp8_all_gather):
        return params * weight_bytes
    return params * weight_bytes - linear_params * (weight_bytes - 1.0)
