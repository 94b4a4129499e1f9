"""Where the cost model's trust comes from: every number set on published rows, and the range it was checked on.

``CALIBRATION`` names, for each number of ``Assumptions`` (and the two model choices that were set on
measurements), its value, the published rows it was set on (``RowSet``: a CSV of ``parlab/data`` and
the rows of it), how (``fitted``: solved for from the rows; ``chosen``: picked so the model reproduces
the rows; ``taken``: copied from a paper or a datasheet, no row involved; ``assumed``: a guess set on
no row and no source yet, named as such) and its source. A published
row that some entry was set on is a *calibration* row (in-sample); every other row the model is
checked against is a *validation* row (out-of-sample): ``answers.validation`` reports the two apart,
and ``bands.STEP_TIME_BAND`` is derived from validation rows only.

``VALIDATED_*`` is the range the published step-time rows cover (GPU, highest measured MFU on it,
links inside and between nodes; calibration and validation rows alike: both are measured runs): an estimate outside it is priced all the same, but marked
(``plan.validated_range``). ``tests/test_costmodel_validation.py`` recomputes these constants from the
rows and fails when they drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

#: how a number was set: solved for from rows / picked so the model reproduces rows / copied from a
#: source / guessed, with no row and no source behind it yet
HOWS = ("fitted", "chosen", "taken", "assumed")


@dataclass(frozen=True)
class RowSet:
    """Rows of ``parlab/data/<file>.csv``: those whose columns equal every (column, value) of ``where``
    (all rows when ``where`` is empty)."""

    file: str
    where: tuple[tuple[str, str], ...] = ()

    def matches(self, file: str, row: dict[str, str]) -> bool:
        """Whether ``row`` of ``file`` is one of these rows."""
        return file == self.file and all(row.get(col) == value for col, value in self.where)

    def describe(self) -> str:
        """'megatron2021_zero3.csv where scheme = zero3' (or 'every row of ...')."""
        if not self.where:
            return f"every row of {self.file}.csv"
        return f"{self.file}.csv where " + ", ".join(f"{c} = {v}" for c, v in self.where)


@dataclass(frozen=True)
class Calibration:
    """One number of the model and where it comes from.

    ``field`` is an ``Assumptions`` field (``value`` as ``Assumptions.describe`` prints it), or a
    dotted name of a model choice outside it (``plan.step_time.zero3_bandwidth``); ``rows`` the
    published rows it was set on (empty when ``how`` is 'taken' or 'assumed'); ``source`` the paper,
    table or file, or why the guess."""

    field: str
    value: str
    rows: tuple[RowSet, ...]
    how: str
    source: str

    def __post_init__(self) -> None:
        if self.how not in HOWS:
            raise ValueError(f"Calibration.how must be one of {HOWS}, got {self.how!r} for {self.field}")
        if (self.how in ("taken", "assumed")) != (not self.rows):
            raise ValueError(f"Calibration {self.field}: rows are given exactly when it was fitted or chosen "
                             f"on them (how={self.how!r}, {len(self.rows)} row sets)")

    def describe(self) -> str:
        """One line: field = value, how, on which rows, from which source."""
        on = "; ".join(r.describe() for r in self.rows)
        return f"{self.field} = {self.value}: {self.how}" + (f" on {on}" if on else "") + f" ({self.source})"


_TABLE1 = RowSet("megatron2021_weak_scaling")
_ZERO3 = (RowSet("megatron2021_zero3", (("scheme", "zero3"),)),
          RowSet("megatron2021_zero3_530b", (("scheme", "zero3"),)))

#: every number of the model set on published data, or taken from a source: one place
CALIBRATION: tuple[Calibration, ...] = (
    Calibration("matmul_efficiency", "0.7", (_TABLE1,), "chosen",
                "Narayanan et al. 2021, Table 1: with the elementwise term, the value that reproduces the "
                "ten rows (Assumptions' docstring)"),
    Calibration("zero3_overlap", "0.5", _ZERO3, "chosen",
                "Narayanan et al. 2021, Table 2: with 1 the six ZeRO-3 rows come out 20-35% high; 0.5 with "
                "the one-port cap puts them within 7%"),
    Calibration("plan.step_time.zero3_bandwidth (one port per GPU across nodes)", "1 port", _ZERO3, "fitted",
                "Narayanan et al. 2021, Table 2: the per-GPU rate the flat step times imply (15.7 GB/s, "
                "70% of one HDR port); no NCCL measurement at that scale was found"),
    Calibration("pricing.inference.fit_decode (bandwidth efficiency, per-token overhead)",
                "least squares", (RowSet("chatglm_inference"),), "fitted",
                "the interview guide's ChatGLM-6B answer times (section 4.1)"),
    Calibration("hbm_efficiency", "0.8", (), "taken", "roofline of memory-bound kernels, Williams et al. 2009"),
    Calibration("elementwise_traffic", "2", (), "taken",
                "Korthikanti et al. 2022, Table 2: each stored activation written once and read once"),
    Calibration("dp_overlap", "True", (), "taken", "PyTorch DDP buckets, Li et al. 2020"),
    Calibration("tp_overlap", "0", (), "taken", "Megatron-LM 2021 leaves TP collectives on the critical path"),
    Calibration("pp_overlap", "0", (), "taken", "Megatron-LM 2021 leaves pipeline sends on the critical path"),
    Calibration("runtime_bytes", "1e+09", (), "taken",
                "CUDA context, cuBLAS and NCCL workspaces on an A100 with PyTorch + NCCL (about 1 GB)"),
    Calibration("fragmentation", "0.1", (), "taken",
                "PyTorch caching allocator: reserved vs allocated typically 5-15% apart"),
    Calibration("optimizer_traffic", "32", (), "taken",
                "fused mixed-precision Adam: reads and writes of master, m, v, gradient and weight"),
    Calibration("cpu_adam_params_per_s", "1e+09", (), "taken", "Ren et al. 2021 (ZeRO-Offload): about 1B params/s"),
    Calibration("fp8_matmul_efficiency", "0.5", (), "assumed",
                "no FP8 run is priced yet (parlab/data/published_runs.csv keeps NeMo's FP8 rows unpriced): "
                "0.5 of the FP8 peak makes an H100's FP8 GEMMs 1.43x its bf16 ones, short of the peaks' 2x"),
)


def calibration(field: str) -> Calibration:
    """The entry of ``field`` (KeyError naming the known fields when there is none)."""
    for c in CALIBRATION:
        if c.field == field:
            return c
    raise KeyError(f"no calibration entry for {field!r}; known: {', '.join(c.field for c in CALIBRATION)}")


def is_calibration_row(file: str, row: dict[str, str]) -> bool:
    """Whether some number of the model was set on this published row (in-sample)."""
    return any(rs.matches(file, row) for c in CALIBRATION for rs in c.rows)


def sample_of(file: str, row: dict[str, str]) -> str:
    """'calibration' (a number was set on the row) or 'validation' (none was)."""
    return "calibration" if is_calibration_row(file, row) else "validation"


# -- the validated range -----------------------------------------------------------------------------
#: GPUs with a published step-time row the model is checked against, and the highest MFU measured on
#: them (model FLOPs / measured step / peak), rounded down to 1%: A100 80GB, MPT-7B on one node
#: without recomputation (64.1%, llm-foundry's benchmark table); H100 SXM, MPT-7B (46.4%).
#: Recomputed by tests/test_costmodel_validation.py from the rows.
VALIDATED_MFU: dict[str, float] = {"a100-80gb": 0.64, "h100-sxm": 0.46}

#: links inside a node and between nodes that those rows ran on: NVLink 3 (Selene, Jean Zay, MosaicML's
#: A100 nodes) and NVLink 4 (MosaicML's H100 nodes); HDR InfiniBand (Megatron-LM 2021, MT-NLG) and
#: Jean Zay's Omni-Path (BLOOM-176B). No multi-node H100 row is priced yet.
VALIDATED_INTRA: frozenset[str] = frozenset({"nvlink3-a100", "nvlink4-h100"})
VALIDATED_INTER: frozenset[str] = frozenset({"ib-hdr", "omni-path"})
