"""The derivations an interviewer asks for, term by term (chapter 14): each returns its terms with
the formula and the paper behind it, and ``tests/test_derivations.py`` checks every total against the
cost model's own number (``parlab.costmodel``), so the derivation and the model cannot drift apart.

Pure Python, like the cost model: activations (Korthikanti et al. 2022), training FLOPs (Kaplan
et al. 2020; Narayanan et al. 2021 Eq. 3), MFU and HFU (Chowdhery et al. 2022, App. B), the ZeRO
model states (Rajbhandari et al. 2020), tensor-parallel bytes (Shoeybi et al. 2019) and the three
back-of-envelope inequalities that decide a layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel import Estimate, ModelSpec, get_model


@dataclass(frozen=True)
class Term:
    what: str
    formula: str
    value: float


@dataclass(frozen=True)
class Derivation:
    """Terms that add up to ``total``, with the closed form they add up to and its source."""

    name: str
    terms: tuple[Term, ...]
    closed_form: str
    source: str

    @property
    def total(self) -> float:
        return sum(t.value for t in self.terms)

    def rows(self, scale: float = 1.0) -> list[list]:
        return [[t.what, t.formula, t.value / scale] for t in self.terms]


def _model(model: str | ModelSpec) -> ModelSpec:
    return get_model(model) if isinstance(model, str) else model


# -- 1. activations: 34 sbh + 5 a s^2 b ---------------------------------------------------------------
def activation_terms(model: str | ModelSpec = "gpt3-175b", micro_batch: int = 1) -> Derivation:
    """Bytes one GPT layer keeps for its backward pass, 16-bit values, 1-byte dropout masks, no
    recomputation, no parallelism (Korthikanti et al. 2022, Sec. 4.1): the attention block keeps
    11 sbh + 5 a s^2 b, the MLP 19 sbh, the two LayerNorms 4 sbh; sum sbh (34 + 5 a s / h)."""
    m = _model(model)
    s, b, h, a = m.seq_len, micro_batch, m.hidden, m.heads
    sbh, ass = s * b * h, a * s * s * b
    terms = (
        Term("attention: QKV matmul input", "2sbh", 2 * sbh),
        Term("attention: Q and K for QK^T", "4sbh", 4 * sbh),
        Term("attention: softmax output", "2as^2b", 2 * ass),
        Term("attention: softmax dropout mask", "as^2b", ass),
        Term("attention: dropout output (for x V)", "2as^2b", 2 * ass),
        Term("attention: V", "2sbh", 2 * sbh),
        Term("attention: output projection input", "2sbh", 2 * sbh),
        Term("attention: dropout mask", "sbh", sbh),
        Term("MLP: first linear input", "2sbh", 2 * sbh),
        Term("MLP: GeLU input (4h wide)", "8sbh", 8 * sbh),
        Term("MLP: second linear input (GeLU output)", "8sbh", 8 * sbh),
        Term("MLP: dropout mask", "sbh", sbh),
        Term("two LayerNorm inputs", "4sbh", 4 * sbh),
    )
    return Derivation("activations per layer", terms, "sbh (34 + 5as/h)",
                      "Korthikanti et al. 2022, Sec. 4.1 and Table 2")


# -- 2. FLOPs: 6ND plus attention ---------------------------------------------------------------------
def training_flops(model: str | ModelSpec = "gpt3-175b", batch: int = 1) -> Derivation:
    """Model FLOPs of one training step on ``batch`` sequences (forward + backward = 3 forwards; a
    multiply-add is 2 FLOPs). Per layer forward: QKV 6bsh^2, QK^T 2bs^2h, scores x V 2bs^2h, output
    projection 2bsh^2, MLP 16bsh^2; logits 2bshV. Summed: 72 B s l h^2 (1 + s/6h + V/12lh), of which
    6 N D (N = 12 l h^2 weights, D = B s tokens: Kaplan et al. 2020) is the first term."""
    m = _model(model)
    s, b, h, n_layers, V = m.seq_len, batch, m.hidden, m.layers, m.vocab
    terms = (
        Term("QKV projections", "3 x 6bsh^2 x l", 3 * 6 * b * s * h * h * n_layers),
        Term("attention output projection", "3 x 2bsh^2 x l", 3 * 2 * b * s * h * h * n_layers),
        Term("MLP (h -> 4h -> h)", "3 x 16bsh^2 x l", 3 * 16 * b * s * h * h * n_layers),
        Term("QK^T and scores x V", "3 x 4bs^2h x l", 3 * 4 * b * s * s * h * n_layers),
        Term("logits", "3 x 2bshV", 3 * 2 * b * s * h * V),
    )
    return Derivation("training FLOPs per step", terms, "72 B s l h^2 (1 + s/6h + V/12lh)",
                      "Kaplan et al. 2020 (6ND); Narayanan et al. 2021, Eq. 3")


def six_nd(model: str | ModelSpec = "gpt3-175b", batch: int = 1) -> float:
    """6 N D with N = 12 l h^2 (the layers' weight matrices) and D = batch x s tokens."""
    m = _model(model)
    return 6 * 12 * m.layers * m.hidden**2 * batch * m.seq_len


# -- 3. MFU and HFU -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Utilisation:
    """Model and hardware FLOPs utilisation of one estimate (Chowdhery et al. 2022, App. B):
    MFU counts the model's FLOPs (no recomputation), HFU what the GPUs really ran."""

    model_flops: float
    hardware_flops: float
    seconds: float
    gpus: int
    peak: float

    @property
    def mfu(self) -> float:
        return self.model_flops / (self.seconds * self.gpus * self.peak)

    @property
    def hfu(self) -> float:
        return self.hardware_flops / (self.seconds * self.gpus * self.peak)


def utilisation(est: Estimate) -> Utilisation:
    """MFU = model FLOPs / (step x GPUs x peak); HFU the same with the recomputed FLOPs."""
    model_flops, hardware_flops = est.flops
    return Utilisation(model_flops, hardware_flops, est.step_time, est.plan.n_gpus, est.time.facts["peak"])


# -- 4. ZeRO's model states ---------------------------------------------------------------------------
def zero_states(n_params: float, dp: int, stage: int, k: int = 12) -> Derivation:
    """Bytes per GPU of the model states under ZeRO ``stage`` over ``dp`` ranks, mixed precision
    with K = ``k`` bytes of optimizer state per parameter (Rajbhandari et al. 2020, Fig. 1): 16-bit
    weights 2 Psi, gradients 2 Psi, optimizer K Psi, each divided by dp from stages 3, 2 and 1 on."""
    psi, n = n_params, dp
    terms = (
        Term("16-bit weights", "2 Psi" + (" / Nd" if stage >= 3 else ""), 2 * psi / (n if stage >= 3 else 1)),
        Term("16-bit gradients", "2 Psi" + (" / Nd" if stage >= 2 else ""), 2 * psi / (n if stage >= 2 else 1)),
        Term("fp32 master + Adam moments", f"{k} Psi" + (" / Nd" if stage >= 1 else ""),
             k * psi / (n if stage >= 1 else 1)),
    )
    closed = {0: "(2 + 2 + K) Psi", 1: "4 Psi + K Psi / Nd", 2: "2 Psi + (2 + K) Psi / Nd",
              3: "(2 + 2 + K) Psi / Nd"}[stage]
    return Derivation(f"ZeRO-{stage} model states", terms, closed, "Rajbhandari et al. 2020, Fig. 1")


# -- 5. tensor parallelism's bytes per layer --------------------------------------------------------
def tp_bytes_per_layer(micro_batch: int, seq_len: int, hidden: int, tp: int, bytes_per_element: int = 2) -> Derivation:
    """Bytes one rank sends per transformer layer and micro-batch under Megatron's 1D TP: g
    all-reduces b s h after attention and after the MLP in the forward, f before each in the
    backward (Shoeybi et al. 2019, Sec. 3): 4 all-reduces, each a ring sending 2 (t-1)/t of the
    message (Thakur et al. 2005)."""
    msg = bytes_per_element * micro_batch * seq_len * hidden
    ring = 2 * (tp - 1) / tp * msg
    terms = tuple(Term(f"{op} ({where})", "2(t-1)/t x 2bsh", ring) for op, where in
                  (("g all-reduce", "forward, after attention"), ("g all-reduce", "forward, after the MLP"),
                   ("f all-reduce", "backward, before attention"), ("f all-reduce", "backward, before the MLP")))
    return Derivation("TP bytes sent per layer", terms, "4 x 2(t-1)/t x 2bsh = 16bsh (t-1)/t",
                      "Shoeybi et al. 2019, Sec. 3")


# -- 6. the three inequalities ----------------------------------------------------------------------
def dp_hiding_tokens(flops_per_s: float, bandwidth: float, dp: int, grad_bytes: int = 2) -> float:
    """Tokens per GPU per step above which DP's gradient all-reduce hides behind the backward pass.

    T is the tokens of the micro-batch whose backward the all-reduce overlaps (with gradient
    accumulation, the last one: DDP's no_sync). Backward compute: 4 N T / F seconds (two thirds of
    6 N T at F achieved FLOP/s); the ring all-reduce of the gradients: 2 (n-1)/n x g N / B. Hidden when 4 N T / F >= 2 (n-1)/n g N / B, i.e.
    T >= (g / 2) (n-1)/n F / B: the parameter count cancels; what matters is tokens per GPU against
    the GPU's FLOP/s per byte/s of its link."""
    return grad_bytes / 2 * (dp - 1) / dp * flops_per_s / bandwidth


def tp_comm_to_compute(hidden: int, tp: int, flops_per_s: float, bandwidth: float, seq_len: int = 0) -> float:
    """TP's communication time over its compute time, per layer: 16bsh (t-1)/t / B against
    3 (24bsh^2 + 4bs^2h) / (t F). b and s cancel (with s << 6h); what is left falls as 1/h:
    2 (t-1) F / (9 h B (1 + s/6h))."""
    return 2 * (tp - 1) * flops_per_s / (9 * hidden * bandwidth * (1 + seq_len / (6 * hidden)))


def bubble_fraction(pp: int, micro_batches: int, chunks: int = 1) -> float:
    """Idle time over useful time of a synchronous pipeline: (p - 1) / (v m) (GPipe and 1F1B with
    v = 1; interleaved 1F1B with v chunks: Narayanan et al. 2021, Sec. 2.2). Small when m >> p."""
    return (pp - 1) / (chunks * micro_batches)


def micro_batches_for_bubble(pp: int, target: float, chunks: int = 1) -> int:
    """The fewest micro-batches that keep ``bubble_fraction`` at or below ``target``."""
    import math

    return math.ceil((pp - 1) / (chunks * target) - 1e-9)
