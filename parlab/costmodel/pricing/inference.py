"""Inference latency of one request on one GPU: prefill (compute-bound), decode (memory-bound) and
a fixed per-token overhead, and a fit of that model to measured answer times.

Autoregressive decoding at batch 1 reads every weight once per generated token and does only about
two FLOPs per weight, far below any GPU's FLOP/byte ridge point, so a token costs the bytes it reads
divided by the memory bandwidth (Pope et al. 2022, "Efficiently Scaling Transformer Inference",
Section 2.1 and 3.1: decoding is memory-bandwidth bound at small batch; the roofline of Williams et
al. 2009). The prompt, processed in one pass (prefill), is compute-bound instead. On top of both, a
real generation loop pays a fixed cost per token that neither bound sees: kernel launches (hundreds
per token for a 28-layer model), the Python of the loop, sampling, the host-device sync that reads
the token back. Pure Python, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from parlab.costmodel.specs._check import fraction, non_negative, positive
from parlab.costmodel.specs.attention import window_split
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.hardware import GPUSpec, get_gpu
from parlab.costmodel.specs.models import ModelSpec

#: Characters of Chinese text per ChatGLM-6B token: an assumption. Its 130k-word text vocabulary
#: (icetk) holds many two-character words; tokenizer-arena (xu-song/tokenizer-arena, README,
#: cc100-zh-Hans) measures 1.47-1.48 characters per token for tokenizers of comparable Chinese
#: coverage (aya_101, baichuan). Every function that uses it takes it as an argument.
CHARS_PER_TOKEN_ZH = 1.5

FP16 = 2  # bytes per weight and per cached K/V value in fp16/bf16 inference


def weight_bytes(model: str | ModelSpec, bytes_per_param: float = FP16) -> float:
    """Bytes of weights read per decode step: every parameter once, N x bytes (Pope et al. 2022,
    Section 3.1: at small batch the weight loading dominates the time of a step). The input
    embedding's lookup reads one row, but with tied embeddings the same matrix is read whole by the
    output layer, so N is right for tied models and within V x h of right otherwise."""
    return get_model(model).num_params() * positive("bytes_per_param", bytes_per_param)


def kv_cache_bytes_per_token(model: str | ModelSpec, kv_heads: int | None = None,
                             bytes_per_value: float = FP16) -> float:
    """Bytes of K/V cache one token of context adds: 2 (K and V) x layers x kv_heads x head_dim x
    bytes (Pope et al. 2022, Section 3.3; with multi-query attention kv_heads = 1, Shazeer 2019;
    grouped-query attention in between, Ainslie et al. 2023). ``kv_heads`` defaults to the model's
    own (``ModelSpec.kv_heads``: all heads for multi-head attention, as ChatGLM-6B; 8 for Llama 3
    and Mixtral). Every layer counted: a sliding window stops its layers' cache growing after w
    tokens, which ``kv_cache_bytes`` (a cache of a given length) prices."""
    m = get_model(model)
    k = (m.kv_heads or m.heads) if kv_heads is None else positive("kv_heads", kv_heads, integer=True)
    if k > m.heads or m.heads % k:
        raise ValueError(f"kv_heads must divide the {m.heads} attention heads, got {k}")
    return 2 * m.layers * k * m.head_dim * positive("bytes_per_value", bytes_per_value)


def kv_cache_bytes(model: str | ModelSpec, context: int, kv_heads: int | None = None,
                   bytes_per_value: float = FP16) -> float:
    """Bytes of K/V cache of one sequence of ``context`` tokens: ``kv_cache_bytes_per_token`` x
    context for full-attention layers, and for sliding-window layers only the last w tokens
    (Jiang et al. 2023, Mistral 7B, Sec. 2, "Rolling Buffer Cache": a cache of fixed size w), with
    the model's pattern of windowed and full layers (``specs.attention.window_split``)."""
    m = get_model(model)
    n = positive("context", context, integer=True)
    per_layer = kv_cache_bytes_per_token(m, kv_heads, bytes_per_value) / m.layers
    windowed, full = window_split(m.layers, m.window, m.window_pattern, n)
    return per_layer * (full * n + windowed * min(m.window, n))


def _windowed_context_sum(window: int, prompt: int, steps: int) -> float:
    """Sum over decode steps t = 0..n-1 of min(w, p + t): the cached tokens a windowed layer reads."""
    k = min(steps, max(0, window - prompt))  # steps whose context is still inside the window
    return k * prompt + k * (k - 1) / 2 + (steps - k) * window


def forward_flops_per_token(model: str | ModelSpec, context: float) -> float:
    """FLOPs of one token's forward pass with ``context`` earlier tokens: 2N + 2 l n_ctx d
    (Kaplan et al. 2020, Table 1: a multiply-add per weight, plus the attention scores and their
    weighted sum against the context; d = a x head_dim, the query width). Every layer is counted
    against the whole context (a sliding window would bound it: an upper bound for Mistral/GPT-OSS)."""
    m = get_model(model)
    return 2 * m.num_params() + 2 * m.layers * non_negative("context", context) * m.q_width


def prefill_flops(model: str | ModelSpec, prompt_tokens: int) -> float:
    """FLOPs of the prompt's single forward pass: s tokens, token i attending to i earlier ones,
    sum_i (2N + 2 l i h) = 2Ns + l h s(s-1) (Kaplan et al. 2020, Table 1, summed over a causal
    prompt)."""
    m = get_model(model)
    s = non_negative("prompt_tokens", prompt_tokens, integer=True)
    return 2 * m.num_params() * s + m.layers * m.q_width * s * (s - 1)


@dataclass(frozen=True)
class Generation:
    """Seconds of one request: prefill, then ``new_tokens`` decode steps, term by term.

    ``weights_s`` and ``kv_s`` are the bytes the decode steps read over the achievable bandwidth,
    ``compute_s`` their FLOPs over the achievable FLOP/s; a step costs the larger (roofline), so
    ``decode_s = max(weights_s + kv_s, compute_s)`` (exact when one bound holds for every step, as
    at batch 1, where memory wins by two orders of magnitude). ``overhead_s`` is the fixed cost per
    token times the tokens."""

    model: ModelSpec
    gpu: GPUSpec
    prompt_tokens: int
    new_tokens: int
    batch: int
    prefill_s: float
    weights_s: float
    kv_s: float
    compute_s: float
    overhead_s: float

    @property
    def decode_s(self) -> float:
        return max(self.weights_s + self.kv_s, self.compute_s)

    @property
    def memory_bound(self) -> bool:
        return self.weights_s + self.kv_s >= self.compute_s

    @property
    def total_s(self) -> float:
        return self.prefill_s + self.decode_s + self.overhead_s

    @property
    def per_token_s(self) -> float:
        """Seconds per generated token, prefill excluded."""
        return (self.decode_s + self.overhead_s) / self.new_tokens

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second of one request (``batch`` requests make batch times more)."""
        return self.new_tokens / self.total_s

    def terms(self) -> dict[str, float]:
        """The total split into what the chapter plots: prefill, weights read, KV read, overhead
        (the compute of decode, hidden under the memory time, is not a term of its own)."""
        memory = self.weights_s + self.kv_s
        scale = self.decode_s / memory if memory else 0.0
        return {"prefill": self.prefill_s, "weights read": self.weights_s * scale,
                "KV cache read": self.kv_s * scale, "per-token overhead": self.overhead_s}


def generation_time(model: str | ModelSpec, gpu: str | GPUSpec, new_tokens: int, prompt_tokens: int = 16, *,
                    batch: int = 1, bandwidth_efficiency: float = 0.7, flops_efficiency: float = 0.5,
                    overhead_s: float = 0.0, bytes_per_param: float = FP16,
                    kv_heads: int | None = None) -> Generation:
    """One request of ``prompt_tokens`` in and ``new_tokens`` out, ``batch`` such requests at once.

    Prefill: ``prefill_flops`` x batch / (peak half-precision FLOP/s x ``flops_efficiency``).
    Decode step t (context p + t): bytes = W + batch x kv x (p + t), over HBM bandwidth x
    ``bandwidth_efficiency`` (Pope et al. 2022, Section 3.1); summed over t = 0..n-1 this is
    n W + batch kv (n p + n(n-1)/2) (a windowed layer reads min(w, p + t) tokens), linear in n plus the slowly growing KV term. Compute of the
    steps: batch x sum_t (2N + 2 l (p+t) h) (Kaplan et al. 2020). ``overhead_s`` per token is added
    as is: the launch/Python/sampling cost no bound models (fit it with ``fit_decode``).
    """
    m, g = get_model(model), get_gpu(gpu)
    n = positive("new_tokens", new_tokens, integer=True)
    p = non_negative("prompt_tokens", prompt_tokens, integer=True)
    b = positive("batch", batch, integer=True)
    bw = g.hbm_bytes_per_s * fraction("bandwidth_efficiency", bandwidth_efficiency)
    speed = g.peak_flops("half") * fraction("flops_efficiency", flops_efficiency)
    non_negative("overhead_s", overhead_s)
    kv = kv_cache_bytes_per_token(m, kv_heads)
    context_sum = n * p + n * (n - 1) / 2  # sum over decode steps of the context length
    weights_s = n * weight_bytes(m, bytes_per_param) / bw
    kv_s = b * kv * context_sum / bw
    if m.window:  # windowed layers read at most w tokens of cache (kv_cache_bytes)
        windowed, _ = window_split(m.layers, m.window, m.window_pattern, p + n)
        read = (m.layers - windowed) * context_sum + windowed * _windowed_context_sum(m.window, p, n)
        kv_s = b * kv / m.layers * read / bw
    compute_s = b * (2 * m.num_params() * n + 2 * m.layers * m.q_width * context_sum) / speed
    return Generation(m, g, p, n, b, b * prefill_flops(m, p) / speed, weights_s, kv_s, compute_s, n * overhead_s)


def tokens_from_chars(chars: float, chars_per_token: float = CHARS_PER_TOKEN_ZH) -> int:
    """Tokens of an answer of ``chars`` characters (at least 1), at ``chars_per_token``."""
    return max(1, round(non_negative("chars", chars) / positive("chars_per_token", chars_per_token)))


@dataclass(frozen=True)
class DecodeFit:
    """The two numbers the model cannot take from a datasheet, fitted to measured answer times:
    the achievable fraction of HBM bandwidth and the fixed overhead per token, shared by every GPU.

    ``rows``: (gpu, answer characters, tokens, measured s, predicted s)."""

    model: ModelSpec
    chars_per_token: float
    prompt_tokens: int
    bandwidth_efficiency: float
    overhead_s: float
    rows: tuple[tuple[str, float, int, float, float], ...]

    @property
    def residuals(self) -> list[float]:
        """Measured minus predicted seconds, row by row."""
        return [meas - pred for _, _, _, meas, pred in self.rows]

    @property
    def rms_residual(self) -> float:
        r = self.residuals
        return math.sqrt(sum(x * x for x in r) / len(r))

    @property
    def physical(self) -> bool:
        """Whether the fit is possible on real hardware: efficiency at most 1, overhead >= 0."""
        return 0 < self.bandwidth_efficiency <= 1 and self.overhead_s >= 0

    def predict(self, gpu: str | GPUSpec, chars: float, model: str | ModelSpec | None = None) -> Generation:
        """The fitted model's generation for an answer of ``chars`` characters on ``gpu`` (of the fitted
        model, or of ``model`` served by the same stack: same efficiency, same overhead per token)."""
        if not self.physical:
            raise ValueError(f"the fit is unphysical (bandwidth efficiency {self.bandwidth_efficiency:.2f}, "
                             f"overhead {self.overhead_s * 1e3:.1f} ms/token): try another chars_per_token")
        return generation_time(self.model if model is None else model, gpu,
                               tokens_from_chars(chars, self.chars_per_token), self.prompt_tokens,
                               bandwidth_efficiency=self.bandwidth_efficiency, overhead_s=self.overhead_s)

    def curve(self, gpu: str | GPUSpec, chars: Sequence[float],
              model: str | ModelSpec | None = None) -> list[tuple[float, float]]:
        """(characters, predicted seconds) for each answer length in ``chars``."""
        return [(float(c), self.predict(gpu, c, model).total_s) for c in chars]

    def residuals_by_gpu(self) -> dict[str, list[tuple[float, float]]]:
        """gpu -> (characters, measured - predicted seconds) for its rows."""
        out: dict[str, list[tuple[float, float]]] = {}
        for gpu, chars, _, meas, pred in self.rows:
            out.setdefault(gpu, []).append((chars, meas - pred))
        return out


def fit_decode(measured: Sequence[tuple[str, float, float]], model: str | ModelSpec = "chatglm-6b",
               chars_per_token: float = CHARS_PER_TOKEN_ZH, prompt_tokens: int = 16) -> DecodeFit:
    """Least-squares fit of ``t = prefill + (1/eff) x M + c x n`` to ``measured`` rows
    (gpu, answer characters, seconds): M is the decode's memory time at the GPU's *peak* bandwidth
    (``generation_time`` with efficiency 1), n the tokens, and the unknowns are 1/eff (one
    bandwidth efficiency for every GPU) and c (one overhead per token). Rows on two GPUs with
    different bandwidths make the two separable: the GPU gap fixes eff, the common slope fixes c."""
    m = get_model(model)
    positive("chars_per_token", chars_per_token)
    if len(measured) < 2:
        raise ValueError(f"fit_decode needs at least 2 measured rows, got {len(measured)}")
    gens, design, target = [], [], []
    for gpu, chars, seconds in measured:
        n = tokens_from_chars(chars, chars_per_token)
        gen = generation_time(m, gpu, n, prompt_tokens, bandwidth_efficiency=1.0)
        positive("measured seconds", seconds)
        gens.append((gpu, chars, n, seconds))
        design.append([gen.weights_s + gen.kv_s, n])
        target.append(seconds - gen.prefill_s)
    inv_eff, c = _least_squares_2(design, target)
    eff = 1 / inv_eff if inv_eff > 0 else float("inf")
    rows = []
    for (gpu, chars, n, seconds), (mem, _), t in zip(gens, design, target, strict=True):
        rows.append((str(gpu), float(chars), n, float(seconds), float(seconds - t + inv_eff * mem + c * n)))
    return DecodeFit(m, float(chars_per_token), prompt_tokens, float(eff), float(c), tuple(rows))


def _least_squares_2(design: list[list[float]], target: list[float]) -> tuple[float, float]:
    """The least-squares (x, y) of ``design @ (x, y) = target`` through the 2 x 2 normal equations
    (pure Python: the cost model imports no numpy). A singular system (rank < 2) is a ValueError."""
    saa = sum(a * a for a, _ in design)
    sab = sum(a * b for a, b in design)
    sbb = sum(b * b for _, b in design)
    sat = sum(a * t for (a, _), t in zip(design, target, strict=True))
    sbt = sum(b * t for (_, b), t in zip(design, target, strict=True))
    det = saa * sbb - sab * sab
    if det <= 1e-12 * saa * sbb:
        raise ValueError("fit_decode needs rows on GPUs of different bandwidths (or lengths) to separate "
                         "the bandwidth efficiency from the overhead")
    return (sbb * sat - sab * sbt) / det, (saa * sbt - sab * sat) / det


@dataclass(frozen=True)
class GPUGap:
    """How much longer an answer takes on ``slow`` than on ``fast``, against their bandwidth ratio."""

    slow: Generation
    fast: Generation

    @property
    def time_ratio(self) -> float:
        return self.slow.total_s / self.fast.total_s

    @property
    def bandwidth_ratio(self) -> float:
        return self.fast.gpu.hbm_bytes_per_s / self.slow.gpu.hbm_bytes_per_s

    @property
    def overhead_share(self) -> float:
        """The fast GPU's time spent in the fixed per-token overhead (it does not shrink with bandwidth)."""
        return self.fast.overhead_s / self.fast.total_s


def gpu_gap(fit: DecodeFit, chars: float, slow: str = "v100", fast: str = "a800") -> GPUGap:
    """The fitted model's answer of ``chars`` characters on two GPUs: the time ratio is
    (M_slow/eff + c) / (M_fast/eff + c), pulled from the bandwidth ratio towards 1 by c."""
    return GPUGap(fit.predict(slow, chars), fit.predict(fast, chars))
