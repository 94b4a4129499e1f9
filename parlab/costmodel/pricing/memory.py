"""Bytes of training state: model states by precision and optimizer (ZeRO paper, Section 3.1)
and activations per transformer layer (Korthikanti et al. 2022, Table 2)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from parlab.costmodel.pricing.activation_terms import (
    RECOMPUTE_MODULES,
    SELECTIVE,
    dropped_terms,
    layer_activation_terms,
    recompute_modules,
)
from parlab.costmodel.pricing.attention_terms import mean_context
from parlab.costmodel.specs._check import boolean, canonical, lookup, positive
from parlab.costmodel.specs.models import ModelSpec


@dataclass(frozen=True)
class Precision:
    """How training stores each parameter, in bytes per element.

    ``weight``: the working copy used by forward/backward; ``grad``: its gradient; ``master``: an
    fp32 copy kept by the optimizer when the working copy is 16-bit; ``state``: bytes of each
    optimizer state element (Adam keeps two: momentum and variance).
    """

    name: str
    weight: int
    grad: int
    master: int
    state: int
    compute_dtype: str
    description: str


PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in [
        Precision("fp32", 4, 4, 0, 4, "fp32", "everything in fp32"),
        Precision("mixed", 2, 2, 4, 4, "half",
                  "fp16/bf16 weights and grads, fp32 master weights and optimizer states "
                  "(Micikevicius et al. 2018; ZeRO paper: 2 + 2 + 12 = 16 bytes/param with Adam)"),
        Precision("mixed-fp32-grad", 2, 4, 4, 4, "half",
                  "mixed precision with fp32 gradient accumulation (Megatron-LM main_grad): "
                  "2 + 4 + 12 = 18 bytes/param with Adam"),
        Precision("bf16", 2, 2, 0, 2, "bf16", "pure bf16: weights, grads and optimizer states in bf16"),
        Precision("fp16", 2, 2, 0, 2, "fp16", "pure fp16 (inference, or training without master weights)"),
    ]
}
_PRECISION_ALIASES = {"amp": "mixed", "fp16-mixed": "mixed", "bf16-mixed": "mixed",
                      "mixed-fp32": "mixed-fp32-grad", "float32": "fp32", "float16": "fp16",
                      "bfloat16": "bf16"}

#: optimizer -> number of state elements per parameter; None means inference (no grads either)
OPTIMIZERS: dict[str, int | None] = {"adam": 2, "adamw": 2, "momentum": 1, "sgd": 0, "none": None}


def get_precision(name: str | Precision) -> Precision:
    """A precision by name: fp32, mixed (alias amp, fp16-mixed, bf16-mixed), mixed-fp32-grad, bf16, fp16."""
    if isinstance(name, Precision):
        return name
    return lookup("dtype", name, PRECISIONS, _PRECISION_ALIASES)


def optimizer_states(name: str) -> int | None:
    """How many state elements per parameter ``name`` keeps (None: inference, no optimizer)."""
    return lookup("optimizer", name, OPTIMIZERS)


@dataclass(frozen=True)
class ModelStateMemory:
    """Bytes of the model states (Rajbhandari et al. 2020, "ZeRO", Section 3.1): weights,
    gradients, fp32 master weights and optimizer states, for ``n_params`` parameters."""

    n_params: float
    precision: str
    optimizer: str
    weights: float
    grads: float
    master: float
    optimizer_states: float

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.master + self.optimizer_states

    @property
    def bytes_per_param(self) -> float:
        return self.total / self.n_params

    def terms(self) -> dict[str, float]:
        """The four terms in bytes, in the order they are usually drawn."""
        return {"weights": self.weights, "gradients": self.grads,
                "fp32 master weights": self.master, "optimizer states": self.optimizer_states}

    def explain(self) -> str:
        p = get_precision(self.precision)
        n_states = optimizer_states(self.optimizer) or 0
        lines = [f"model states for {self.n_params / 1e9:.4g}B parameters, dtype {p.name}, "
                 f"optimizer {self.optimizer}", f"  ({p.description})"]
        per = {"weights": p.weight, "gradients": p.grad if self.grads else 0,
               "fp32 master weights": p.master if self.master else 0,
               "optimizer states": n_states * p.state}
        for name, value in self.terms().items():
            lines.append(f"  {name:<20} {per[name]:>2} B/param x {self.n_params:.4g} = {value / 1e9:,.1f} GB")
        lines.append(f"  {'total':<20} {self.bytes_per_param:>2.0f} B/param            = {self.total / 1e9:,.1f} GB")
        lines.append("  source: Rajbhandari et al. 2020 (ZeRO), Section 3.1")
        return "\n".join(lines)


def model_state_memory(n_params: float, dtype: str = "mixed", optimizer: str = "adam") -> ModelStateMemory:
    """Bytes of weights, gradients, master weights and optimizer states for ``n_params`` parameters.

    Mixed precision with Adam costs 2 + 2 + K bytes per parameter with K = 12 (fp32 master
    weights, momentum and variance): 16 bytes (ZeRO paper, Section 3.1); with gradients
    accumulated in fp32 it is 18. Pure fp32 with Adam is 4 + 4 + 8 = 16 as well (guide 1.1:
    175B -> 700 GB weights + 700 GB grads + 1.4 TB Adam = 2.8 TB). ``optimizer='none'``
    counts the weights alone (inference).
    """
    positive("n_params", n_params)
    p = get_precision(dtype)
    n_states = optimizer_states(optimizer)
    if n_states is None:
        return ModelStateMemory(n_params, p.name, optimizer, p.weight * n_params, 0.0, 0.0, 0.0)
    return ModelStateMemory(n_params, p.name, optimizer.lower(), p.weight * n_params,
                            p.grad * n_params, p.master * n_params, n_states * p.state * n_params)


RECOMPUTE = ("none", "selective", "full")
#: What a ``Plan`` accepts: ``RECOMPUTE`` and module-level recompute (``Plan.recompute_modules``),
#: which searches do not enumerate.
PLAN_RECOMPUTE = RECOMPUTE + ("modules",)


def attention_score_bytes(model: ModelSpec, micro_batch: int = 1, tp: int = 1) -> float:
    """Bytes one layer keeps for the attention scores, per micro-batch, on one of ``tp`` ranks.

    Without FlashAttention (Korthikanti et al. 2022, Table 2): the softmax output 2 a s^2 b and,
    with dropout, its 1-byte mask a s^2 b and the dropped-out probabilities 2 a s^2 b: 5 a s^2 b
    (2 a s^2 b without dropout, where the softmax output itself feeds the product with V).
    With FlashAttention (Dao et al. 2022, Sec. 3.1) the backward pass recomputes the scores from
    Q, K, V, and only each row's softmax statistics are kept: the fp32 log-sum-exp, 4 a s b; any
    dropout mask is regenerated from the RNG state. Split over the heads, so / t. A sliding window
    (``attention_terms.mean_context``) keeps a s s_ctx b: each query's window of keys (the
    banded kernels store no more; the mean layer of a model mixing windowed and full layers).
    """
    s, b, a = model.seq_len, micro_batch, model.heads
    if model.flash_attention:
        return 4 * a * s * b / tp
    return (5 if model.dropout else 2) * a * s * mean_context(model) * b / tp


def activation_bytes_per_layer(model: ModelSpec, micro_batch: int = 1, tp: int = 1,
                               sequence_parallel: bool = False, recompute: str = "none", *, cp: int = 1,
                               moe_layer: bool | None = None, modules: tuple[str, ...] = ()) -> float:
    """Activation bytes one transformer layer keeps for the backward pass, per micro-batch.

    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
    Table 2 (16-bit activations, 1-byte dropout masks), for GPT's block, with s, b, h, a, t:

    ========================  =====================================
    no parallelism            s b h (34 + 5 a s / h)
    tensor parallel           s b h (10 + 24/t + 5 a s / (h t))
    tensor + sequence par.    s b h (34/t + 5 a s / (h t))
    + selective recompute     drops the 5 a s / (h t) attention term
    full recompute            2 s b h (2 s b h / t with sequence parallel)
    ========================  =====================================

    The same count, term by term, for any block (``ModelSpec``'s flags), in bytes:

    * kept whole on every TP rank (split only by sequence parallelism): the inputs of the two
      norms 4 s b h (LayerNorm or RMSNorm: both save their 16-bit input), of the QKV and the first
      MLP matmul 2 s b h each, and with dropout the two 1-byte masks after attention and MLP 2 s b h;
    * split by TP: Q, K, V 6 s b h and the attention output 2 s b h; the MLP's inner activations,
      4 s b f for GeLU (its input and output, f = 4h: Table 2's 16 s b h), 6 s b f for SwiGLU (the
      gate and up projections, from which the fused SwiGLU recomputes its SiLU, and their product,
      the last matmul's input); and the attention scores (``attention_score_bytes``).

    GPT's block comes to Table 2's 34 s b h + 5 a s^2 b; LLaMA's (SwiGLU, no dropout, FlashAttention)
    to s b (16 h + 6 f) + 4 a s b.

    Attention other than multi-head of width h (``attention_terms``; Ainslie et al. 2023): Q is
    a d wide and K, V g d each, so the stored Q, K, V are 2 s b (a d + 2 g d) and the attention
    output 2 s b a d in place of 6 s b h and 2 s b h; with g < t each TP rank keeps one K/V head
    (its K, V replicated t / g times, Megatron-Core). QK-norm (Qwen3) keeps its input too,
    2 s b (a d + g d) / t; sandwich norms (Gemma 2/3) two more norm inputs, 4 s b h kept whole.

    Context parallelism over ``cp`` ranks (ring attention, Liu et al. 2023; Ulysses, Jacobs et al.
    2023; Megatron-Core's CP) splits the sequence: each rank keeps every term above for its s / cp
    tokens, the attention scores too (its s / cp queries against all s keys): all / cp.

    A layer of an MoE model (``model.moe``; ``moe_layer`` False for one of its dense first layers,
    None: an MoE layer if the model has experts) replaces the MLP's inner activations by those of
    the experts each token visits: ``expert_parallel.dispatch_rows`` rows (T k for a dropless
    layer, the padded E x C buffer with a capacity factor) of 6 f_e bytes (4 f_e ungated) plus
    each row's 16-bit input to the first expert matmul 2 h, the K_s shared experts' T K_s x 6 f_e,
    and the router's fp32 probabilities 4 T E (Megatron-Core keeps them for the aux loss), with
    T = s b / cp tokens per rank. Split over the TP group like the MLP (Megatron-Core's expert
    tensor parallelism, etp = tp).

    The terms are ``activation_terms.layer_activation_terms``'s; selective recompute drops the
    attention scores (Megatron-Core's default recompute module, core_attn), full recompute keeps
    the layer's input alone, and ``recompute='modules'`` drops what each of ``modules``
    (Megatron-Core's ``recompute_modules``: ``activation_terms.MODULE_TERMS``) recomputes.
    """
    positive("micro_batch", micro_batch, integer=True)
    positive("tp", tp, integer=True)
    if cp != 1 or type(cp) is not int:
        positive("cp", cp, integer=True)
    boolean("sequence_parallel", sequence_parallel)
    recompute = canonical("recompute", recompute, PLAN_RECOMPUTE)
    s, b, h, t = model.seq_len, micro_batch, model.hidden, tp
    if recompute == "full":
        full_bytes = 2 * s * b * h / (t if sequence_parallel else 1)
        return full_bytes if cp == 1 else full_bytes / cp
    if recompute == "modules" and not modules:
        raise ValueError("recompute='modules' needs the modules to recompute, e.g. modules=('mlp',); "
                         f"allowed: {', '.join(RECOMPUTE_MODULES)}")
    dropped = dropped_terms(SELECTIVE if recompute == "selective" else
                            recompute_modules(modules) if recompute == "modules" else ())
    terms = layer_activation_terms(model, b, cp, moe_layer, t)
    whole = sum(n for name, (where, n) in terms.items() if where == "whole" and name not in dropped)
    split = sum(n for name, (where, n) in terms.items() if where == "split" and name not in dropped)
    scores = 0.0 if "attention scores" in dropped else attention_score_bytes(model, b, t)
    out = whole / (t if sequence_parallel else 1) + split / t + scores
    return out if cp == 1 else out / cp



#: ``activation_bytes_per_layer`` memoised, for the plan floor (a search asks it the same few
#: questions for thousands of plans): the cache is keyed on every argument the function takes
#: (the whole frozen ``ModelSpec`` and a plan's checked, hashable fields), so no input it reads
#: can be left out of the key; a caller passes hashable values (``modules`` as a tuple).
layer_activation_bytes = lru_cache(maxsize=4096)(activation_bytes_per_layer)


def bytes_per_param(dtype: str = "mixed", optimizer: str = "adam") -> float:
    """Bytes of model states per parameter (16 for mixed precision with Adam)."""
    return model_state_memory(1, dtype, optimizer).total


def largest_model(memory_bytes: float, dtype: str = "mixed", optimizer: str = "adam") -> float:
    """The most parameters whose model states fit in ``memory_bytes`` (activations not counted).

    Guide 1.14: 80 GB / 2 bytes = 40B parameters of fp16 weights (``optimizer='none'``),
    80 GB / 16 bytes = 5B parameters for mixed-precision training with Adam.
    """
    return positive("memory_bytes", memory_bytes) / bytes_per_param(dtype, optimizer)


def activation_bytes(model: ModelSpec, micro_batch: int = 1, recompute: str = "none") -> float:
    """Activation bytes of a whole model on one GPU (no parallelism), per micro-batch in flight.

    l layers x ``activation_bytes_per_layer`` plus what lives outside the layers (Korthikanti
    et al. 2022, Section 4.3, as coded in Megatron-LM's theoretical_memory_usage.py): the token
    ids 8sb, the embedding dropout mask sbh (with dropout), and the inputs of the output layer and
    the cross-entropy loss 4sbh(1 + V/h) (fp32 logits).
    """
    s, b, h, V = model.seq_len, micro_batch, model.hidden, model.vocab
    layers = model.layers * activation_bytes_per_layer(model, micro_batch, recompute=recompute)
    mask = s * b * h if model.dropout else 0
    return layers + 8 * s * b + mask + 4 * s * b * h * (1 + V / h)

