"""Pictures for chapter 09: one GPU's memory by term in each phase of the step under each
recompute policy, and the activation bytes TinyGPT really stored beside the cost model's count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from parlab.costmodel.answers.phases import StepPhases

from .costmodel import MEMORY_COLORS, stacked_bar

POLICY_ORDER = ("none", "selective", "full")
#: the terms of ``parlab.costmodel.answers.phases.TERMS``, coloured as ``MEMORY_COLORS`` where they match
PHASE_COLORS = {"parameters": MEMORY_COLORS["parameters"], "gradients": MEMORY_COLORS["gradients"],
                "optimizer states": MEMORY_COLORS["optimizer states"], "activations": MEMORY_COLORS["activations"],
                "fp32 gradient copy": "#e8b98f", "runtime buffers": "#777777", "fragmentation": "#cccccc"}


def plot_phases_by_recompute(ax, phases: Mapping[str, StepPhases], chosen: str) -> None:
    """Two stacked bars (GB) per recompute policy: the forward/backward phase and the optimizer
    step, the phase that sets the peak outlined; the ``chosen`` policy in bold; the GPU's capacity
    as a dashed line."""
    names = [p for p in POLICY_ORDER if p in phases]
    labels, totals = [], []
    for i, policy in enumerate(names):
        ph = phases[policy]
        for j, phase in enumerate(ph.phases):
            y = 2.4 * i + j
            totals.append(stacked_bar(ax, phase.terms, PHASE_COLORS, 1e9, y=y, height=0.8))
            if phase is ph.peak:
                ax.barh(y, phase.total / 1e9, height=0.8, fill=False, edgecolor="black", lw=1.4)
            labels.append((y, f"{policy}: {'fwd/bwd' if j == 0 else 'step'}", policy == chosen))
    est = phases[names[0]].estimate
    cap = est.memory_capacity / 1e9
    top = 2.4 * (len(names) - 1) + 1.6
    capacity = f"{est.cluster.gpu.name}: {cap:.0f} GB"
    ax.axvline(cap, color="black", lw=1.2, ls="--", label=capacity)
    handles, legend = ax.get_legend_handles_labels()
    found = dict(zip(legend, handles, strict=True))
    unique = {k: found[k] for k in [*PHASE_COLORS, capacity] if k in found}
    ax.set_yticks([y for y, _, _ in labels], [t for _, t, _ in labels], fontsize=9)
    for tick, (_, _, bold) in zip(ax.get_yticklabels(), labels, strict=True):
        tick.set_fontweight("bold" if bold else "normal")
    ax.set_ylim(-0.6, top + 0.6)
    ax.invert_yaxis()
    ax.set_xlim(0, max(max(totals), cap) * 1.15)
    ax.set_xlabel("memory per GPU (GB = 1e9 bytes); outlined: the phase that sets the peak", fontsize=9)
    ax.tick_params(labelsize=9)
    ax.legend(unique.values(), unique.keys(), loc="center left", fontsize=9, bbox_to_anchor=(1.01, 0.5),
              frameon=False)


def plot_measured_vs_model(ax, rows: Sequence[Mapping[str, float]]) -> None:
    """Bars of the bytes per layer TinyGPT saved (measured) beside Table 2's count plus the named
    extras, one pair per recompute policy (rows of ``recompute.recompute_table``)."""
    xs = range(len(rows))
    measured = [r["measured B/layer"] / 1e3 for r in rows]
    modelled = [r["model + extras B"] / 1e3 for r in rows]
    ax.bar([x - 0.2 for x in xs], measured, 0.4, color="#8172b3", label="measured (saved-tensor hooks)")
    ax.bar([x + 0.2 for x in xs], modelled, 0.4, color="#cccccc", edgecolor="#555", label="Table 2 + norm stats + mask")
    ax.set_xticks(list(xs), [r["recompute"] for r in rows], fontsize=9)
    ax.set_ylabel("kB saved per layer", fontsize=9)
    ax.set_ylim(0, max(measured + modelled) * 1.4)  # headroom: the legend sits above the bars
    ax.tick_params(labelsize=9)
    ax.legend(fontsize=9, frameon=False, loc="upper right", ncol=1)


RUN_COLORS = {"fp32": "#4c72b0", "fp16, no scaling": "#c44e52", "fp16 + loss scaler": "#55a868",
              "bf16, no scaling": "#8172b3", "torch autocast fp16 + GradScaler": "#937860"}


def plot_loss_curves(ax, runs: Mapping[str, Sequence[float]]) -> None:
    """The loss per step of each labelled run (labels of ``RUN_COLORS``); each later run is drawn
    thinner and in another dash on top of the earlier ones, so runs that overlap all stay visible."""
    styles = ["-", "--", ":", "-."]
    for i, (label, losses) in enumerate(runs.items()):
        ax.plot(range(1, len(losses) + 1), losses, styles[i % len(styles)], color=RUN_COLORS.get(label, "#555"),
                label=label, lw=max(1.0, 3.4 - 0.6 * i), marker="o", ms=max(2.0, 5 - i))
    ax.set_xlabel("step", fontsize=9)
    ax.set_ylabel("training loss", fontsize=9)
    ax.tick_params(labelsize=9)
    ax.legend(fontsize=9, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
