"""What a 3D run reports beside its losses: every rank's measured and predicted bytes in one
table (gathered on rank 0), and a pipeline's measured timeline of the last step, for the
command line (``parlab.train``) and the chapters.
"""

from __future__ import annotations

import torch

from .engine import resolve_device
from .plan import RankReport, TrainPlan


def pipeline_timeline(plan: TrainPlan, reports: list[RankReport], tp: int = 0, dp: int = 0):
    """The measured timeline (``pipeline_parallel.measured_timeline``) of the last step of the pipeline
    at (tp, dp): its pp ranks' op spans on one axis, drawn by ``parlab.viz.gantt``."""
    from ..pipeline_parallel.executor import measured_timeline

    runs = sorted((r.coords[2], r.last_run) for r in reports if r.coords[:2] == (tp, dp))
    return measured_timeline(plan.make_schedule(), [run for _, run in runs])


SUMMARY = (("parameters", ("memory", "parameters")), ("optimizer", ("memory", "optimizer states")),
           ("in flight", ("memory", "micro-batches in flight")), ("TP sent", ("traffic", "tp")),
           ("PP sent", ("traffic", "pp")), ("DP sent", ("traffic", "dp")))


def _value(d: dict, path: tuple[str, str]) -> float:
    v = d.get(path[0], {}).get(path[1], 0)
    return float(sum(v.values()) if isinstance(v, dict) else v)


def gather_summary(comm, report: RankReport, device: str = "cpu") -> list[dict] | None:
    """Every rank's measured and predicted numbers (``SUMMARY``), on rank 0 (None elsewhere):
    one all-gather of a few float64 per rank (collective: every rank calls it; ``device``: where
    the communicator's tensors live, 'cuda' under NCCL)."""
    row = [float(report.rank), *report.coords]
    for _, path in SUMMARY:
        row += [_value(report.measured, path), _value(report.predicted, path)]
    mine = torch.tensor(row, dtype=torch.float64, device=resolve_device(device))
    table = comm.all_gather(mine).cpu().numpy().reshape(comm.world_size, -1)
    if comm.rank != 0:
        return None
    rows = []
    for line in table.tolist():
        r = {"rank": int(line[0]), "tp": int(line[1]), "dp": int(line[2]), "pp": int(line[3])}
        for i, (name, _) in enumerate(SUMMARY):
            r[name] = (line[4 + 2 * i], line[5 + 2 * i])
        rows.append(r)
    return rows


def summary_table(rows: list[dict], backend: str = "local", wide: bool = True) -> str:
    """The per-rank table: 'measured / predicted' bytes (and micro-batches in flight); not
    ``wide`` (the command line's default, under 100 columns): the measured figure alone where
    it equals the prediction, 'measured (!= predicted)' where it differs."""
    head = ["rank", "tp", "dp", "pp"] + [name for name, _ in SUMMARY]

    def cell(measured: float, predicted: float) -> str:
        if wide:
            return f"{measured:,.0f} / {predicted:,.0f}"
        return f"{measured:,.0f}" if measured == predicted else f"{measured:,.0f} (!= {predicted:,.0f})"

    body = [[str(r[k]) for k in head[:4]] + [cell(*r[n]) for n, _ in SUMMARY] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(x.rjust(w) for x, w in zip(line, widths, strict=True)) for line in [head, *body]]
    if wide:
        note = "measured / predicted by the cost model, bytes per rank in the last step"
    else:
        same = all(r[n][0] == r[n][1] for r in rows for n, _ in SUMMARY)
        note = ("bytes per rank in the last step, measured: "
                + ("all as the cost model predicts" if same else "'A (!= P)': the model predicts P")
                + " (--wide: both)")
    torch_note = "(torch backend: collective bytes are nominal)" if backend == "torch" else ""
    note = f"{note} {torch_note}" if wide and torch_note else note
    return "\n".join([note, *([torch_note] if torch_note and not wide else []), *lines])
