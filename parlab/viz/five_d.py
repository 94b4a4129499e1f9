"""Chapter 13's pictures: memory per GPU against the sequence length, one line per context-
parallel degree, with the GPU's capacity (the estimates come from ``costmodel.scenarios_5d``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from parlab.costmodel.plan.estimate import Estimate

#: one colour per cp degree, the same in every figure of the chapter
CP_COLORS = {1: "#4c72b0", 2: "#dd8452", 4: "#55a868", 8: "#c44e52", 16: "#8172b3", 32: "#937860"}


def memory_vs_sequence_figure(series: Mapping[int, Sequence[Estimate]], title: str = ""):
    """Memory of the most loaded GPU (GB) against the sequence length (K tokens, log2 scale), one
    line per cp, the GPU's capacity dashed."""
    from parlab.viz.figures import new_figure

    fig = new_figure(6.4, 2.9, left=0.12, right=0.8, bottom=0.17, top=0.88)
    ax = fig.add_subplot()
    first = next(iter(series.values()))
    seqs = [e.model.seq_len / 1024 for e in first]
    for cp, ests in series.items():
        ax.plot(seqs, [e.memory_total / 1e9 for e in ests], marker="o", ms=4, color=CP_COLORS.get(cp),
                label=f"cp = {cp}")
    cap = first[0].memory_capacity / 1e9
    ax.axhline(cap, color="black", lw=1.2, ls="--", label=f"{first[0].cluster.gpu.name}: {cap:.0f} GB")
    ax.set_xscale("log", base=2)
    ax.set_xticks(seqs, [f"{s:g}K" for s in seqs])
    ax.set_ylim(0, None)
    ax.set_xlabel("sequence length (tokens)", fontsize=9)
    ax.set_ylabel("memory per GPU (GB)", fontsize=9)
    ax.tick_params(labelsize=9)
    ax.set_title(title or f"{first[0].model.name}: memory of one GPU as the sequence grows", fontsize=9)
    ax.legend(loc="center left", fontsize=9, bbox_to_anchor=(1.01, 0.5), frameon=False)
    return fig
