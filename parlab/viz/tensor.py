"""Pictures of chapter 05: the column and row splits of Y = XA, and the tensor-parallel modes'
per-layer time and memory (numbers from ``parlab.costmodel.pricing.tensor_parallel``)."""

from __future__ import annotations

from matplotlib.patches import Rectangle

from parlab.costmodel.pricing.tensor_parallel import LABELS, MODES, ModeOnLink, layer_cost, tp_grid

from .figures import log_ticks, new_figure

RANK_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52")  # rank 0..3, as in chapter 02
MODE_COLORS = {"1d": "#4C72B0", "1d-sp": "#8172B3", "2d": "#55A868", "2.5d": "#DD8452", "3d": "#C44E52"}
GREY = "#BBBBBB"


def _matrix(ax, x0: float, y0: float, w: float, h: float, label: str, blocks: int = 1,
            axis: str = "col", colors=None) -> None:
    """A w x h matrix at (x0, y0), cut into ``blocks`` along columns or rows, coloured by rank."""
    for i in range(blocks):
        if axis == "col":
            rect = (x0 + i * w / blocks, y0, w / blocks, h)
        else:
            rect = (x0, y0 + h - (i + 1) * h / blocks, w, h / blocks)
        color = colors[i] if colors else GREY
        ax.add_patch(Rectangle(rect[:2], rect[2], rect[3], facecolor=color, edgecolor="white", lw=1.5))
        if blocks > 1:
            ax.text(rect[0] + rect[2] / 2, rect[1] + rect[3] / 2, f"{label}{i + 1}", ha="center",
                    va="center", fontsize=9, color="white")
    if blocks == 1:
        ax.text(x0 + w / 2, y0 + h / 2, label, ha="center", va="center", fontsize=10)


def split_figure(t: int = 2):
    """Column split (A by columns, Y gathered) beside row split (A by rows, X by columns, Y summed),
    blocks coloured by the rank that holds them (guide 1.7; Shoeybi et al. 2019, Eq. 2-3)."""
    if not 2 <= t <= len(RANK_COLORS):
        raise ValueError(f"t must be 2..{len(RANK_COLORS)} for the picture, got {t}")
    fig = new_figure(7.6, 2.7, left=0.01, right=0.99, bottom=0.02, top=0.8, wspace=0.05)
    colors = RANK_COLORS[:t]
    for k, (title, xb, ab, op) in enumerate([
        (f"column-parallel: A = [A1 ... A{t}]\nY = all-gather of Yi = X Ai", 1, "col", "gather"),
        (f"row-parallel: X = [X1 ... X{t}], A by rows\nY = all-reduce of Yi = Xi Ai", t, "row", "sum"),
    ]):
        ax = fig.add_subplot(1, 2, k + 1)
        ax.set_xlim(0, 10)
        ax.set_ylim(0, 4)
        ax.axis("off")
        ax.set_title(title, fontsize=9)
        _matrix(ax, 0.2, 1.2, 2.4, 1.6, "X", xb, "col", colors if xb > 1 else None)
        ax.text(2.9, 2.0, "x", fontsize=12, ha="center", va="center")
        _matrix(ax, 3.3, 0.6, 2.0, 2.8, "A", t, ab, colors)
        ax.text(5.7, 2.0, "=", fontsize=12, ha="center", va="center")
        if op == "gather":
            _matrix(ax, 6.1, 1.2, 3.6, 1.6, "Y", t, "col", colors)
        else:
            _matrix(ax, 6.1, 1.2, 3.6, 1.6, "Y = " + " + ".join(f"Y{i + 1}" for i in range(t)))
    return fig


def modes_figure(rows: list[ModeOnLink]):
    """Per-layer seconds (communication over matmuls) and memory per GPU, one bar per mode that
    fits; the bars share ``MODE_COLORS``."""
    fits = [r for r in rows if r.cost is not None]
    fig = new_figure(7.0, 2.6, left=0.08, right=0.99, bottom=0.2, top=0.88, wspace=0.35)
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    names = [r.mode for r in fits]
    xs = range(len(fits))
    ax1.bar(xs, [r.compute_s * 1e3 for r in fits], color="#DDDDDD", label="matmuls")
    ax1.bar(xs, [r.comm_s * 1e3 for r in fits], bottom=[r.compute_s * 1e3 for r in fits],
            color=[MODE_COLORS[m] for m in names], label="communication")
    ax1.set_ylabel("ms per layer, micro-batch", fontsize=9)
    ax1.set_title("time: matmuls (grey) + communication", fontsize=9)
    ax2.bar(xs, [r.states_bytes / 1e9 for r in fits], color="#DDDDDD", label="model states")
    ax2.bar(xs, [r.activation_bytes / 1e9 for r in fits], bottom=[r.states_bytes / 1e9 for r in fits],
            color=[MODE_COLORS[m] for m in names], label="activations")
    ax2.set_ylabel("GB per GPU (all layers)", fontsize=9)
    ax2.set_title("memory: model states (grey) + activations", fontsize=9)
    for ax in (ax1, ax2):
        ax.set_xticks(list(xs), names, fontsize=9)
        ax.tick_params(labelsize=8)
    return fig


def scaling_figure(model, micro_batch: int, ps: list[int], depth: int = 2):
    """Per-layer bytes each GPU sends, and activation bytes each GPU keeps, against the number of
    GPUs p, for every mode at the p its grid fits (2.5D with the given depth)."""
    fig = new_figure(7.0, 3.0, left=0.08, right=0.99, bottom=0.29, top=0.9, wspace=0.3)
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for mode in MODES:
        pts = []
        for p in ps:
            try:
                tp_grid(mode, p, depth)
                c = layer_cost(mode, model, micro_batch, p, depth)
            except ValueError:
                continue
            pts.append((p, c.volume / 1e9, c.activations / 1e9))
        if pts:  # modes of equal cost lie on one line: each its own marker and dash, both visible
            k = list(MODES).index(mode)
            kw = {"color": MODE_COLORS[mode], "marker": "os^Dv"[k % 5], "ms": 4, "label": LABELS[mode],
                  "linestyle": ("-", "--", ":", "-.")[k % 4], "markerfacecolor": "none"}
            ax1.plot([x[0] for x in pts], [x[1] for x in pts], **kw)
            ax2.plot([x[0] for x in pts], [x[2] for x in pts], **kw)
    for ax, title in ((ax1, "GB sent per GPU per layer"), (ax2, "GB of activations per GPU per layer")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("GPUs in the tensor-parallel group (p)", fontsize=9)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=8)
        log_ticks(ax.yaxis)
    # one legend for both panels (the same series), under them: it covers no line
    fig.legend(*ax1.get_legend_handles_labels(), loc="lower center", ncol=len(MODES), fontsize=8,
               frameon=False, bbox_to_anchor=(0.5, 0.0))
    return fig
