"""Pictures of chapter 07: who holds which shard of the model states under ZeRO stages 0-3, memory
per GPU by stage (measured beside modelled), and the ZeRO dashboard's stage-by-stage bars.

Which terms a stage shards comes from ``parlab.costmodel.zero_model_states`` (Rajbhandari et al.
2020, Figure 1): a term a stage divides by N is drawn as one shard per rank, owned by the rank of
its colour (the same rank colours as chapter 02); a term it keeps whole is held in full by every
rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.patches import Rectangle

from parlab.costmodel import zero_model_states
from parlab.costmodel.plan.estimate import Estimate

from .comm import FONT, RANK_COLORS
from .costmodel import MEMORY_COLORS, TIME_COLORS, stacked_bar
from .figures import new_figure

#: the three model-state terms of the ZeRO paper, in the order they are drawn (top to bottom)
TERMS = ("parameters", "gradients", "optimizer states")
EMPTY = "#f2f2f2"  # a shard a rank does not hold
GATHERED = "gathered units"  # ZeRO-3's full units held during a step, drawn on top of the states
COLORS = {**MEMORY_COLORS, GATHERED: "#9ecae1"}
SHORT = {"buffers + fragmentation (allowance)": "buffers + fragmentation",
         "DP/ZeRO communication (exposed)": "ZeRO comm. (exposed)"}  # legend labels that fit


def state_bytes(stage: int, n: int, n_params: float = 1.0) -> dict[str, float]:
    """Bytes per GPU of each of ``TERMS`` under ZeRO ``stage`` over ``n`` ranks, for ``n_params``
    parameters (mixed-precision Adam: 2 + 2 + 12 bytes each), from ``zero_model_states``: the
    optimizer term is the fp32 master weights plus Adam's two moments."""
    s = zero_model_states(n_params, n, stage)
    return {"parameters": s.weights, "gradients": s.grads, "optimizer states": s.master + s.optimizer_states}


def sharded(stage: int, n: int) -> dict[str, bool]:
    """Which of ``TERMS`` ZeRO ``stage`` splits over ``n`` ranks (each rank holds 1/n of it)."""
    one, full = state_bytes(stage, n), state_bytes(0, n)
    return {t: n > 1 and one[t] < full[t] for t in TERMS}


def _draw_stage(ax, stage: int, n: int) -> None:
    """One panel: a column per rank, a row per term, each cell cut into n shards; a shard is
    filled with its owner's colour where the rank holds it, pale grey where it does not."""
    split = sharded(stage, n)
    cell_w, gap = 1.0, 0.25
    for r in range(n):
        x0 = r * (cell_w + gap)
        for k, term in enumerate(TERMS):
            y0 = len(TERMS) - 1 - k
            for j in range(n):
                held = not split[term] or j == r
                color = RANK_COLORS[j % len(RANK_COLORS)] if held else EMPTY
                ax.add_patch(Rectangle((x0 + j * cell_w / n, y0 + 0.12), cell_w / n, 0.76, facecolor=color,
                                       edgecolor="white", lw=0.8))
        ax.text(x0 + cell_w / 2, -0.12, f"rank {r}", ha="center", va="top", fontsize=FONT)
    bpp = sum(state_bytes(stage, n).values())
    ax.set_title(f"ZeRO-{stage}: {bpp:g} B/param per GPU", fontsize=FONT)
    ax.set_xlim(-0.05, n * (cell_w + gap) - gap + 0.05)
    ax.set_ylim(-0.5, len(TERMS))
    ax.axis("off")


def shard_figure(n: int = 4, stages: Sequence[int] = (0, 1, 2, 3)):
    """Who holds which shard between two steps, one panel per ZeRO stage: n ranks x (parameters,
    gradients, optimizer states), each term cut into n shards coloured by the rank that owns it
    (updates it); an empty shard is one the rank does not hold. Titles give the bytes per
    parameter each GPU keeps: 16, 4 + 12/N, 2 + 14/N, 16/N (Rajbhandari et al. 2020, Figure 1)."""
    if not 2 <= n <= len(RANK_COLORS):
        raise ValueError(f"the shard picture draws 2..{len(RANK_COLORS)} ranks, got n={n}")
    stages = list(stages)
    for s in stages:
        if s not in (0, 1, 2, 3):
            raise ValueError(f"ZeRO stage must be one of 0, 1, 2, 3, got {s!r}")
    fig = new_figure(1.9 * len(stages) + 1.1, 1.9, left=0.12, right=0.995, bottom=0.08, top=0.86, wspace=0.08)
    for i, s in enumerate(stages):
        ax = fig.add_subplot(1, len(stages), i + 1)
        _draw_stage(ax, s, n)
        if i == 0:
            for k, term in enumerate(TERMS):
                ax.text(-0.15, len(TERMS) - 1 - k + 0.5, term.replace(" ", "\n", 1), ha="right", va="center",
                        fontsize=FONT)
    return fig


def memory_figure(modelled: Mapping[int, Mapping[str, float]],
                  measured: Mapping[int, Mapping[str, float]] | None = None,
                  peaks: Mapping[int, tuple[float, float]] | None = None, unit: float = 2**20,
                  unit_label: str = "MiB", title: str = ""):
    """Memory per GPU by ZeRO stage: for each stage a bar of the modelled ``TERMS`` (stacked, in
    ``MEMORY_COLORS``; a ``GATHERED`` entry, ZeRO-3's gathered units, on top in light blue) and,
    if given, the measured bar beside it (hatched). ``peaks`` maps a stage
    to its (modelled, measured) peak during a step (the model states plus, under ZeRO-3, the
    gathered units; measured, also a unit's gradient bucket): a black tick over each bar."""
    stages = list(modelled)
    fig = new_figure(6.8, 2.7, left=0.1, right=0.64, bottom=0.17, top=0.88)
    ax = fig.add_subplot()
    width = 0.38 if measured else 0.6
    for i, s in enumerate(stages):
        bars = [(i - width / 2 if measured else i, modelled[s], None, 0)]
        if measured:
            bars.append((i + width / 2, measured[s], "//", 1))
        for x, terms, hatch, which in bars:
            bottom = 0.0
            for term in (*TERMS, GATHERED):
                v = terms.get(term, 0.0) / unit
                if v <= 0:
                    continue
                ax.bar(x, v, width, bottom=bottom, color=COLORS[term], hatch=hatch, edgecolor="white",
                       lw=0.5, label=term if hatch is None else None)
                bottom += v
            if peaks and s in peaks:
                ax.plot([x - width / 2, x + width / 2], [peaks[s][which] / unit] * 2, color="black", lw=1.6,
                        label="peak during a step" if (i == 0 and which == 0) else None)
    if measured:
        ax.bar([0], [0], color="white", edgecolor="#555555", hatch="//", label="hatched: measured")
    handles: dict[str, object] = {}
    for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
        handles.setdefault(lab, h)
    ax.set_xticks(range(len(stages)), [f"ZeRO-{s}" for s in stages], fontsize=FONT)
    ax.set_ylabel(f"per GPU ({unit_label})", fontsize=FONT)
    ax.tick_params(labelsize=FONT)
    if title:
        ax.set_title(title, fontsize=FONT)
    ax.legend(list(handles.values()), list(handles), fontsize=FONT, loc="center left", bbox_to_anchor=(1.01, 0.5),
              frameon=False)
    return fig


def stages_figure(estimates: Mapping[int, Estimate | str], selected: int):
    """The ZeRO dashboard's picture: for each stage 0-3 the memory of one GPU by term (left, with
    the GPU's capacity dashed; a bar far past it is cut at 3x the capacity and labelled with its
    total) and the step time by term (right), each with its legend below; the ``selected``
    stage's label is bold; a stage whose plan is not valid (a string: the rule it breaks) is
    labelled 'not valid'."""
    fig = new_figure(7.8, 3.0, left=0.09, right=0.98, bottom=0.36, top=0.96, wspace=0.25)
    mem, tim = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    stages = sorted(estimates)
    ys = {s: len(stages) - 1 - i for i, s in enumerate(stages)}
    valid = {s: e for s, e in estimates.items() if not isinstance(e, str)}
    cap = next(iter(valid.values())).memory_capacity / 1e9 if valid else 1.0
    xmax = min(max((e.memory_total / 1e9 for e in valid.values()), default=cap), 3 * cap)
    xmax = max(xmax, cap) * 1.08
    for s in stages:
        if s not in valid:
            for ax in (mem, tim):
                ax.text(0, ys[s], " not valid", va="center", fontsize=FONT, color="#b00020")
            continue
        total = stacked_bar(mem, valid[s].memory_terms(), MEMORY_COLORS, 1e9, y=ys[s], height=0.6)
        if total > xmax:
            mem.text(xmax, ys[s], f"{total:,.0f} GB \u2192 ", ha="right", va="center", fontsize=FONT,
                     color="white", fontweight="bold")
        stacked_bar(tim, valid[s].time_terms(), TIME_COLORS, 1.0, y=ys[s], height=0.6)
    if valid:
        mem.axvline(cap, color="black", lw=1, ls="--", label=f"GPU memory, {cap:.0f} GB")
    mem.set_xlim(0, xmax)
    for ax, what in ((mem, "memory per GPU (GB)"), (tim, "time per step (s)")):
        ax.set_yticks([ys[s] for s in stages], [f"ZeRO-{s}" for s in stages], fontsize=FONT)
        for label, s in zip(ax.get_yticklabels(), stages, strict=True):
            label.set_fontweight("bold" if s == selected else "normal")
        ax.tick_params(labelsize=FONT)
        ax.set_xlabel(what, fontsize=FONT)
        ax.set_ylim(-0.6, len(stages) - 0.4)
        handles: dict[str, object] = {}
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
        ax.legend(list(handles.values()), [SHORT.get(lab, lab) for lab in handles], fontsize=8,
                  loc="upper left", bbox_to_anchor=(-0.05, -0.2), ncol=2, frameon=False, handlelength=1.2,
                  columnspacing=0.8)
    return fig


def megatron_zero3_figure(rows: Sequence):
    """Guide 1.17's picture from Narayanan et al. 2021 (Sec. 5.2, Table 2): TFLOP/s per GPU of GPT-3
    175B against the GPU count at a fixed global batch, ZeRO-3 measured and modelled (its rows from
    ``parlab.costmodel.answers.validation.megatron_zero3``) beside PTD-P (3D parallelism) measured; the
    colours are the advisor's (``FAMILY_COLORS``)."""
    from .costmodel import FAMILY_COLORS

    gpus = [r.gpus for r in rows]
    fig = new_figure(5.6, 2.8, left=0.12, right=0.62, bottom=0.27, top=0.9)
    ax = fig.add_subplot()
    ax.plot(gpus, [r.measured_ptdp for r in rows], "o-", ms=4, color=FAMILY_COLORS["3D"],
            label="PTD-P (3D), measured")
    ax.plot(gpus, [r.measured for r in rows], "o-", ms=4, color=FAMILY_COLORS["ZeRO-3"], label="ZeRO-3, measured")
    ax.plot(gpus, [r.predicted for r in rows], "o--", ms=4, color=FAMILY_COLORS["ZeRO-3"], mfc="white",
            label="ZeRO-3, cost model")
    ax.set_xscale("log", base=2)
    ax.minorticks_off()
    ax.set_xticks(gpus, [f"{g:,}\n(mb {r.micro_batch})" for g, r in zip(gpus, rows, strict=True)], fontsize=FONT)
    ax.set_ylim(0, 1.15 * max(max(r.measured_ptdp, r.predicted) for r in rows))
    ax.set_xlabel("A100 GPUs, global batch fixed (micro-batch per GPU)", fontsize=FONT)
    ax.set_ylabel("TFLOP/s per GPU", fontsize=FONT)
    ax.tick_params(labelsize=FONT)
    ax.set_title("GPT-3 175B (Narayanan et al. 2021, Table 2)", fontsize=FONT)
    ax.legend(fontsize=FONT, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    return fig


#: what a ZeRO engine's ledger counts on the device, bottom to top in ``timeline_figure``
HELD = ("parameters", GATHERED, "gradients", "optimizer states")
_LEDGER = {"parameters": "parameters", "gathered": GATHERED, "gradients": "gradients",
           "optimizer states": "optimizer states"}


def _phase(label) -> str:
    """'forward', 'backward' or 'update': the part of a step a ledger sample's label belongs to."""
    name = label[0] if isinstance(label, tuple) else str(label)
    if name in ("reduce", "backward end"):
        return "backward"
    if name in ("updated", "step end"):
        return "update"
    return "forward" if name in ("init", "forward start", "forward end") else name


def timeline_figure(histories: Mapping[int, Sequence[tuple[object, Mapping[str, float]]]], unit: float = 2**10,
                    unit_label: str = "KiB"):
    """Who holds what when, measured: for each ZeRO stage, the bytes one rank held at each sample
    of one step (``(label, {category: bytes})`` in order, as ``parlab.parallel.measure.MemoryLedger``
    samples them wherever a unit is gathered or freed or a gradient bucket comes or goes), stacked
    by category, with the step's forward, backward and update marked along the bottom. Each stage
    has its own y scale (ZeRO-3 holds a fraction of ZeRO-0's bytes: on ZeRO-0's scale its gathered
    units would vanish)."""
    stages = list(histories)
    fig = new_figure(7.6, 0.7 + 0.9 * len(stages), left=0.12, right=0.78, bottom=0.1, top=0.95, hspace=0.5)
    for i, s in enumerate(stages):
        ax = fig.add_subplot(len(stages), 1, i + 1)
        samples = list(histories[s])
        top = max((sum(v for k, v in held.items() if k in _LEDGER) for _, held in samples), default=0.0) / unit
        top = top or 1.0
        xs = range(len(samples))
        bottom = [0.0] * len(samples)
        for term in HELD:
            ys = [sum(v for k, v in held.items() if _LEDGER.get(k) == term) / unit for _, held in samples]
            if any(ys):
                ax.bar(xs, ys, 1.0, bottom=bottom, color=COLORS[term], align="edge", lw=0)
                bottom = [b + y for b, y in zip(bottom, ys, strict=True)]
        phases = [_phase(label) for label, _ in samples]
        for j, ph in enumerate(phases):
            if j == 0 or ph != phases[j - 1]:
                if j:
                    ax.axvline(j, color="black", lw=0.6, ls=":")
                ax.text(j + 0.1, top * 1.02, ph, fontsize=8, va="bottom")
        ax.set_xlim(0, len(samples))
        ax.set_ylim(0, top * 1.3)
        ax.set_xticks([])
        ax.set_ylabel(f"ZeRO-{s}\n({unit_label})", fontsize=FONT)
        ax.tick_params(labelsize=8)
        if i == 0:
            ax.legend([Rectangle((0, 0), 1, 1, color=COLORS[t]) for t in HELD], list(HELD), fontsize=FONT,
                      loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.axes[-1].set_xlabel("moments of one step where what the rank holds changes", fontsize=FONT)
    return fig
