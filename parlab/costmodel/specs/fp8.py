"""FP8 training recipes, per tensor: which GEMMs run in FP8, with which scales, what stays in
BF16/FP32, and the bytes an FP8 recipe adds. One frozen ``FP8Recipe`` per recipe, one table.

What every recipe here shares (TransformerEngine's ``fp8_autocast``, NVIDIA TE docs "Using FP8 with
Transformer Engine"; DeepSeek-V3 tech report, Sec. 3.3.1, Fig. 6): the three GEMMs of each linear
layer (QKV, attention output, MLP or expert matrices) run in FP8 at the GPU's FP8 peak: the forward
(Fprop, activations x weights), the input gradient (Dgrad) and the weight gradient (Wgrad). What
stays in BF16 or FP32: attention's scores, softmax and score x V (TE's ``DotProductAttention``
unless ``fp8_dpa``; DeepSeek-V3: "attention operators"), the norms, the embedding and the output
layer (DeepSeek-V3: "embedding module, the output head"), the MoE router, the optimizer with its
FP32 master weights and states, and the gradients the optimizer reads. The FP8 model keeps its
BF16 weights and casts them to FP8: the FP8 copy, and on Hopper its transpose (Hopper's FP8 tensor
cores take only the "TN" layout, so the backward's W^T needs its own FP8 copy: TE caches both) are
extra memory, plus the scales.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.specs._check import boolean, lookup, non_negative, text

TE_SRC = ("NVIDIA TransformerEngine docs: recipe.DelayedScaling (amax_history_len=1024, E4M3 forward / "
          "E5M2 gradients: Format.HYBRID), recipe.Float8CurrentScaling, recipe.MXFP8BlockScaling")
DEEPSEEK_SRC = "DeepSeek-V3 tech report (arXiv 2412.19437), Sec. 3.3.1-3.3.3, Fig. 6-7"
FSDP_SRC = ("torchao float8 README and torchao.float8.fsdp_utils: FSDP2 all-gathers Float8Linear weights in "
            "float8 (enable_fsdp_float8_all_gather, tensorwise scaling), half of bf16's bytes")


@dataclass(frozen=True)
class FP8Recipe:
    """One FP8 recipe, per tensor.

    ``activation_scale`` / ``weight_scale``: how many elements share one scale (0: one per tensor;
    128: a 1x128 tile; 16,384: a 128x128 block; 32: an MX 1x32 block). ``scale_bytes``: bytes of
    one scale (4: an FP32 scale; 1: MX's E8M0 exponent). ``amax_history``: FP32 amax values kept per
    FP8 tensor (delayed scaling reads the scale from the past ``amax_history`` steps).
    ``weight_copies``: FP8 copies of each linear weight held beside the BF16 one (2: the weight and
    its transpose, or MX's row-wise and column-wise copies). ``fp8_all_gather``: whether FSDP2
    (ZeRO-3) gathers the weights in FP8. ``mx``: needs MXFP8 tensor cores (Blackwell).
    """

    name: str
    scaling: str
    activation_scale: int
    weight_scale: int
    scale_bytes: int
    amax_history: int
    weight_copies: int
    fp8_all_gather: bool
    mx: bool
    source: str

    def __post_init__(self) -> None:
        text("FP8Recipe.name", self.name)
        text(f"FP8Recipe({self.name!r}).scaling", self.scaling)
        for field in ("activation_scale", "weight_scale", "scale_bytes", "amax_history", "weight_copies"):
            non_negative(f"FP8Recipe({self.name!r}).{field}", getattr(self, field), integer=True)
        boolean(f"FP8Recipe({self.name!r}).fp8_all_gather", self.fp8_all_gather)
        boolean(f"FP8Recipe({self.name!r}).mx", self.mx)
        text(f"FP8Recipe({self.name!r}).source", self.source)

    def weight_bytes_per_param(self) -> float:
        """Bytes an FP8 recipe adds per linear-layer weight: its FP8 copies (1 B each) and, for
        block scales, one scale per ``weight_scale`` elements of each copy."""
        per_copy = 1.0 + (self.scale_bytes / self.weight_scale if self.weight_scale else 0.0)
        return self.weight_copies * per_copy

    def tensor_scale_bytes(self, gemms: float) -> float:
        """Bytes of per-tensor scaling state for ``gemms`` linear GEMM modules: TE keeps a scale, its
        inverse and the amax history for each FP8 tensor, 3 per module forward (input, weight,
        output) and 2 backward (output gradient, input gradient): 5 x (2 + history) x 4 B."""
        if self.weight_scale:
            return 0.0
        return gemms * 5 * (2 + self.amax_history) * 4.0


FP8_RECIPES: dict[str, FP8Recipe] = {
    r.name: r
    for r in [
        FP8Recipe("te-delayed", "per tensor, delayed: the scale from the max amax of the last 1,024 steps",
                  0, 0, 4, 1024, 2, True, False, TE_SRC + "; " + FSDP_SRC),
        FP8Recipe("te-current", "per tensor, current: the scale from this tensor's own amax (an extra read)",
                  0, 0, 4, 0, 2, True, False, TE_SRC + "; " + FSDP_SRC),
        FP8Recipe("deepseek-blockwise", "fine-grained: 1x128 activation tiles, 128x128 weight blocks, FP32 "
                  "scales, FP32 accumulation promoted every 128 elements", 128, 128 * 128, 4, 0, 2, False,
                  False, DEEPSEEK_SRC),
        FP8Recipe("mxfp8", "MXFP8: one E8M0 scale per 1x32 block, row-wise and column-wise copies",
                  32, 32, 1, 0, 2, False, True,
                  TE_SRC + "; OCP Microscaling Formats (MX) spec v1.0; NVIDIA Blackwell whitepaper"),
    ]
}
#: the recipe ``Plan(dtype="fp8")`` takes when none is named: TE's default for ``fp8_autocast``
DEFAULT_FP8_RECIPE = "te-delayed"
_RECIPE_ALIASES = {"delayed": "te-delayed", "current": "te-current", "tensorwise": "te-current",
                   "blockwise": "deepseek-blockwise", "deepseek": "deepseek-blockwise", "mx": "mxfp8"}


def get_fp8_recipe(name: str | FP8Recipe) -> FP8Recipe:
    """An FP8 recipe by name (``FP8_RECIPES``: te-delayed, te-current, deepseek-blockwise, mxfp8)."""
    if isinstance(name, FP8Recipe):
        return name
    return lookup("FP8 recipe", name, FP8_RECIPES, _RECIPE_ALIASES)


def fp8_recipe_name(name: str) -> str:
    """The canonical name of an FP8 recipe spelling."""
    return get_fp8_recipe(name).name
