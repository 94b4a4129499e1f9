"""Pictures of the rank grid (``parlab.layout``): every rank of a dp x tp x pp grid as a cell, its
TP, PP or DP groups coloured, nodes outlined. Chapter 08 shows the guide's 1.9 figure (32 workers:
4-way TP x 4-way PP x 2-way DP) and the MT-NLG 530B layout of guide 2.1.

Cells are placed as the guide's figure draws them: one column per pipeline stage, one block of
rows per data-parallel replica (a gap between replicas), the TP ranks of a stage stacked inside
it. The layout itself (who is in which group, which node a rank is on) comes from
``parlab.layout``; nothing here computes a rank.
"""

from __future__ import annotations

from matplotlib.collections import LineCollection
from matplotlib.patches import Rectangle

from parlab.layout import ORDER, Grid
from parlab.tables import plural

from .figures import new_figure

#: one colour family per group kind: the same in every figure of the chapter
DIM_CMAPS = {"tp": "tab20", "pp": "tab20b", "dp": "tab20c"}
DIM_NAMES = {"tp": "TP", "pp": "PP", "dp": "DP"}
FONT = 9
GAP = 0.6  # rows of space between two data-parallel replicas

#: the guide's 1.9 figure: 4-way tensor, 4-way pipeline, 2-way data parallel = 32 workers
GUIDE_1_9 = Grid(dp=2, tp=4, pp=4)
#: MT-NLG 530B (Smith et al. 2022, arXiv 2201.11990, Sec. 3.2): 8-way TP inside a DGX A100 node,
#: 35 pipeline stages (280 GPUs per replica), then data parallel (the guide names 8, 10, 12 ways)
MT_NLG_TP, MT_NLG_PP = 8, 35


def mt_nlg_grid(dp: int = 8) -> Grid:
    """MT-NLG 530B's grid with ``dp`` replicas of 8 x 35 = 280 GPUs."""
    return Grid(dp=dp, tp=MT_NLG_TP, pp=MT_NLG_PP)


def cell_xy(grid: Grid, rank: int) -> tuple[float, float]:
    """Lower-left corner of ``rank``'s cell: x = pipeline stage, y counted down from the top
    (replica by replica, TP rank inside)."""
    c = grid.coords(rank)
    row = c.dp * (grid.tp + GAP) + c.tp
    return float(c.pp), -row - 1.0


def group_title(grid: Grid, dim: str, gpus_per_node: int | None) -> str:
    """'8 TP groups of 4 ranks,\ninside a node' (where the groups sit, from ``Grid.span``)."""
    n, size = grid.world // grid.size(dim), grid.size(dim)
    head = f"{plural(n, DIM_NAMES[dim] + ' group')} of {plural(size, 'rank')}"
    if gpus_per_node is None or size == 1:
        return head
    span = grid.span(dim, gpus_per_node)
    where = "inside a node" if not span.crosses_nodes else f"over {plural(span.nodes, 'node')}"
    return f"{head},\n{where}"


def draw_grid(ax, grid: Grid, dim: str | None = None, gpus_per_node: int | None = None,
              label_ranks: bool = True, title: str | None = None) -> None:
    """Draw ``grid`` on ``ax``: one cell per rank, coloured by its ``dim`` group (None: grey),
    nodes of ``gpus_per_node`` GPUs outlined in black."""
    from matplotlib import colormaps

    if dim is not None and dim not in ORDER:
        raise ValueError(f"unknown group {dim!r}; allowed: {', '.join(ORDER)}")
    group_of: dict[int, int] = {}
    if dim is not None:
        for k, members in enumerate(grid.groups(dim)):
            group_of.update(dict.fromkeys(members, k))
        cmap = colormaps[DIM_CMAPS[dim]]
    for rank in range(grid.world):
        x, y = cell_xy(grid, rank)
        color = cmap(group_of[rank] % cmap.N) if dim is not None else "#DDDDDD"
        ax.add_patch(Rectangle((x + 0.05, y + 0.05), 0.9, 0.9, facecolor=color, edgecolor="white", lw=0.5))
        if label_ranks:
            ax.text(x + 0.5, y + 0.5, str(rank), ha="center", va="center", fontsize=FONT - 1)
    if gpus_per_node is not None:
        ax.add_collection(LineCollection(node_edges(grid, gpus_per_node), colors="black", linewidths=1.2))
    rows = grid.dp * (grid.tp + GAP) - GAP
    ax.set_xlim(-0.1, grid.pp + 0.1)
    ax.set_ylim(-rows - 0.1, 0.1)
    ax.set_aspect("equal" if grid.pp <= 2 * rows else "auto")
    ax.set_xticks([p + 0.5 for p in range(grid.pp)])
    ax.set_xticklabels([str(p) for p in range(grid.pp)], fontsize=FONT)
    ax.set_xlabel("pipeline stage", fontsize=FONT)
    ax.set_yticks([-(d * (grid.tp + GAP) + grid.tp / 2) for d in range(grid.dp)])
    ax.set_yticklabels([f"replica {d}" for d in range(grid.dp)], fontsize=FONT)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(title if title is not None else group_title(grid, dim, gpus_per_node) if dim else str(grid),
                 fontsize=FONT + 1)


def node_edges(grid: Grid, gpus_per_node: int) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """Line segments (each once) between cells on different nodes and around the outside of
    each replica block: the node outlines."""
    segments = set()
    for r in range(grid.world):
        c = grid.coords(r)
        x, y = cell_xy(grid, r)
        for (dpp, dtp), seg in (((1, 0), ((x + 1, y), (x + 1, y + 1))), ((-1, 0), ((x, y), (x, y + 1))),
                                ((0, -1), ((x, y + 1), (x + 1, y + 1))), ((0, 1), ((x, y), (x + 1, y)))):
            pp, tp = c.pp + dpp, c.tp + dtp  # the neighbour in the same replica block
            inside = 0 <= pp < grid.pp and 0 <= tp < grid.tp
            if not inside or grid.rank(tp=tp, dp=c.dp, pp=pp) // gpus_per_node != r // gpus_per_node:
                segments.add(tuple(sorted(tuple(round(v, 6) for v in pt) for pt in seg)))
    return sorted(segments)


def grid_figure(grid: Grid = GUIDE_1_9, gpus_per_node: int | None = 8, dims: tuple[str, ...] = ORDER,
                label_ranks: bool = True):
    """One panel per group kind in ``dims``: the same cells, coloured by that kind's groups
    (guide 1.9: TP groups inside a node, each pipeline a row across stages, DP pairs across
    replicas). Black outlines are nodes of ``gpus_per_node`` GPUs (None: no nodes)."""
    if not dims:
        raise ValueError("grid_figure needs at least one group kind in dims")
    panel = max(2.2, 0.42 * grid.pp + 0.9)
    width, height = panel * len(dims) + 0.6, 0.3 * (grid.dp * (grid.tp + GAP)) + 1.6
    fig = new_figure(width, height, left=0.9 / width, right=0.99, bottom=0.75 / height,
                     top=1 - 0.55 / height, wspace=0.25)
    for k, dim in enumerate(dims):
        ax = fig.add_subplot(1, len(dims), k + 1)
        draw_grid(ax, grid, dim, gpus_per_node, label_ranks)
        if k:
            ax.set_yticklabels([])
    if gpus_per_node is not None:
        fig.text(0.5, 0.01, f"{grid}: {grid.world} ranks; black outline: the ranks of one node "
                 f"({gpus_per_node} GPUs)", ha="center", va="bottom", fontsize=FONT)
    return fig


def mt_nlg_figure(dp: int = 8, gpus_per_node: int = 8):
    """MT-NLG 530B on DGX A100 nodes (guide 2.1) drawn node by node: each box is one node of
    ``gpus_per_node`` GPUs holding one 8-way TP group (NVLink), a row of 35 boxes is one replica
    (its pipelines run across 35 nodes, 280 GPUs), the ``dp`` rows are the data-parallel
    replicas; the DP groups of a stage run down a column."""
    from matplotlib import colormaps

    grid = mt_nlg_grid(dp)
    tp_span = grid.span("tp", gpus_per_node)
    pp_span, dp_span = grid.span("pp", gpus_per_node), grid.span("dp", gpus_per_node)
    fig = new_figure(7.6, 0.2 * dp + 1.5, left=0.1, right=0.82, bottom=0.16, top=0.8)
    ax = fig.add_subplot()
    cmap = colormaps[DIM_CMAPS["pp"]]
    for d in range(grid.dp):
        for p in range(grid.pp):
            first = grid.rank(tp=0, dp=d, pp=p)  # the node holding this stage of this replica
            ax.add_patch(Rectangle((p + 0.08, -d - 0.92), 0.84, 0.84, facecolor=cmap(d % cmap.N),
                                   edgecolor="black", lw=0.4))
            if first // gpus_per_node != grid.group("tp", first)[-1] // gpus_per_node:
                raise ValueError(f"the MT-NLG picture draws one node per TP group: tp={grid.tp} needs "
                                 f"gpus_per_node={grid.tp}, got {gpus_per_node}")
    ax.set_xlim(0, grid.pp)
    ax.set_ylim(-grid.dp, 0)
    ax.set_xticks([0.5, grid.pp - 0.5])
    ax.set_xticklabels(["0", str(grid.pp - 1)], fontsize=FONT)
    ax.set_xlabel(f"pipeline stage (PP = {grid.pp}, InfiniBand between stages: "
                  f"{plural(pp_span.nodes, 'node')} per pipeline)", fontsize=FONT)
    ax.set_yticks([-d - 0.5 for d in range(grid.dp)])
    ax.set_yticklabels([f"replica {d}" for d in range(grid.dp)], fontsize=FONT - 1)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.text(grid.pp + 0.5, -grid.dp / 2, f"DP = {grid.dp}\n(a stage's DP\ngroup: down a\ncolumn, "
            f"{plural(dp_span.nodes, 'node')})", ha="left", va="center", fontsize=FONT)
    ax.set_title(f"MT-NLG 530B: {grid.world:,} GPUs = {grid.dp} replicas x {grid.pp} stages x "
                 f"{grid.tp}-way TP\none box = one node of {gpus_per_node} GPUs = one TP group "
                 f"({'NVLink' if not tp_span.crosses_nodes else 'network'}); one replica = "
                 f"{grid.tp * grid.pp} GPUs", fontsize=FONT + 1)
    return fig
