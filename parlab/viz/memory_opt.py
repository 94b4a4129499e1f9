"""Pictures for chapter 09: one GPU's memory by term under each recompute policy, and the
activation bytes TinyGPT really stored beside the cost model's count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from parlab.costmodel.estimate import Estimate

from .costmodel import MEMORY_COLORS, stacked_bar

POLICY_ORDER = ("none", "selective", "full")


def plot_memory_by_recompute(ax, estimates: Mapping[str, Estimate], chosen: str) -> None:
    """One stacked bar (GB) per recompute policy of the most loaded GPU's memory, the ``chosen``
    one labelled in bold, with the GPU's capacity as a dashed line."""
    names = [p for p in POLICY_ORDER if p in estimates]
    totals = []
    for y, policy in enumerate(names):
        totals.append(stacked_bar(ax, estimates[policy].memory_terms(), MEMORY_COLORS, 1e9, y=y, height=0.6))
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    est = estimates[names[0]]
    cap = est.memory_capacity / 1e9
    ax.axvline(cap, color="black", lw=1.2, ls="--")
    ax.text(cap, len(names) - 0.45, f"{est.cluster.gpu.name} {cap:.0f} GB ", fontsize=9, va="bottom", ha="right")
    ax.set_yticks(range(len(names)), names, fontsize=9)
    ax.set_ylabel("recompute", fontsize=9)
    for tick, policy in zip(ax.get_yticklabels(), names, strict=True):
        tick.set_fontweight("bold" if policy == chosen else "normal")
    ax.set_ylim(-0.5, len(names))
    ax.set_xlim(0, max(max(totals), cap) * 1.15)
    ax.set_xlabel("memory per GPU (GB = 1e9 bytes)", fontsize=9)
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
