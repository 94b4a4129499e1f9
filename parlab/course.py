"""The course map: chapters, and every question of the interview guide with the chapter answering it.

The guide (``shared/guide/interview_guide_zh.txt``, Chinese) is cited by section number; the
question texts here are our own short English paraphrases. Chapter 00 prints this map and
tests check it against the guide's headings and the notebooks on disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

COURSE_DIR = Path(__file__).resolve().parent.parent / "course"


@dataclass(frozen=True)
class Chapter:
    number: int
    slug: str
    title: str
    sections: tuple[str, ...]  # guide sections it answers

    @property
    def file(self) -> str:
        return f"{self.number:02d}_{self.slug}.ipynb"

    @property
    def ready(self) -> bool:
        return (COURSE_DIR / self.file).exists()


CHAPTERS: tuple[Chapter, ...] = (
    Chapter(0, "start_here", "Start here", ()),
    Chapter(1, "why_distributed", "Why distribute: the memory and compute walls", ("1.1", "1.10", "1.14")),
    Chapter(2, "communication", "Communication: point-to-point and collectives", ("1.2", "1.3")),
    Chapter(3, "data_parallel", "Data parallelism: DDP, buckets, overlap, no_sync", ("1.4", "1.5", "1.11")),
    Chapter(4, "pipeline_parallel", "Pipeline parallelism: GPipe, 1F1B, interleaved", ("1.6", "1.12", "1.13")),
    Chapter(5, "tensor_parallel", "Tensor parallelism: row/column splits, f and g", ("1.7", "1.13", "1.15")),
    Chapter(6, "comparing", "DP vs TP vs PP, measured", ("1.8",)),
    Chapter(7, "zero_fsdp", "ZeRO and FSDP", ("1.16", "1.17", "1.19")),
    Chapter(8, "3d_parallelism", "3D parallelism", ("1.9", "1.14", "2.1", "2.2")),
    Chapter(9, "memory_optimizations", "Memory optimisations: recompute, offload, mixed precision", ("1.10", "1.21")),
    Chapter(10, "choosing_a_strategy", "Choosing a strategy: the cost model as an advisor",
            ("1.18", "1.19", "1.20", "1.22", "2.3", "3.1", "3.2", "3.3", "3.4", "3.5")),
    Chapter(11, "practice", "Practice: inference speed, multi-node bandwidth, launching runs",
            ("4.1", "4.2", "4.3", "4.4", "4.5")),
    Chapter(12, "interview_drill", "Interview drill", ()),
)

#: guide section -> the question, paraphrased in English
GUIDE_QUESTIONS: dict[str, str] = {
    "1.1": "What problems does training a large language model run into?",
    "1.2": "What is point-to-point communication?",
    "1.3": "What is collective communication?",
    "1.4": "What is data parallelism?",
    "1.5": "How is data parallelism made faster (buckets, overlap, skipping synchronisation)?",
    "1.6": "What is pipeline parallelism?",
    "1.7": "What is tensor (intra-layer) parallelism: row- and column-parallel matmuls?",
    "1.8": "How do data, tensor and pipeline parallelism compare?",
    "1.9": "What is 3D parallelism?",
    "1.10": "To train on a single GPU, what must the card have?",
    "1.11": "With N GPUs that each hold the whole model, how do you train faster?",
    "1.12": "What if one GPU cannot hold the whole model?",
    "1.13": "Pipeline inference runs one stage at a time; what else can you do?",
    "1.14": "Can DP, TP and PP be combined, and how big a model does one 80 GB card hold?",
    "1.15": "What are Colossal-AI's 1D/2D/2.5D/3D tensor parallelism?",
    "1.16": "Besides 3D parallelism, how else can you train at scale?",
    "1.17": "With ZeRO available, why is 3D parallelism still needed?",
    "1.18": "Is 3D parallelism for teams without NVLink clusters?",
    "1.19": "Is multi-node ZeRO-3 over 10 GbE practical?",
    "1.20": "What distributed and memory-saving techniques exist, and how do they differ?",
    "1.21": "What memory optimisations exist (recompute, offload, mixed precision)?",
    "1.22": "What are the common distributed training frameworks?",
    "2.1": "With many 8-GPU DGX A100 nodes, how do you lay out 3D parallelism?",
    "2.2": "Which frameworks do you build a large parallel training system from?",
    "2.3": "How do you choose DP/TP/PP sizes (BLOOM's experiments)?",
    "3.1": "How do you choose a distributed training framework?",
    "3.2": "How do you choose a technology stack?",
    "3.3": "One GPU: what to do?",
    "3.4": "One node with several GPUs: what to do?",
    "3.5": "Several nodes: what to do?",
    "4.1": "Checking inference speed (ChatGLM on V100 vs A800)",
    "4.2": "Speeding up parallel training (DeepSpeed ZeRO stage 2 vs 3)",
    "4.3": "DeepSpeed reports that it cannot find a host",
    "4.4": "Why can multi-node training be slower than one node?",
    "4.5": "Multi-node NCCL cannot connect (DeepSpeed settings)",
}


#: guide sections that ask two things, answered in different chapters: section -> {chapter: part}
PARTS: dict[str, dict[int, str]] = {
    "1.14": {1: "how big a model one 80 GB card holds", 8: "combining DP, TP and PP"},
}


def part(section: str, chapter: int) -> str:
    """The part of guide ``section`` that ``chapter`` answers ('' when it answers all of it)."""
    return PARTS.get(section, {}).get(chapter, "")


def chapters_for(section: str) -> list[Chapter]:
    """The chapters answering a guide section (chapters 00 and 12 cover everything implicitly)."""
    return [c for c in CHAPTERS if section in c.sections]


def question_map() -> list[tuple[str, str, str]]:
    """(section, question, 'NN title [(planned)] [: part]; ...') for every guide question; a
    section answered in parts (``PARTS``) names the part each chapter answers."""
    rows = []
    for section, question in GUIDE_QUESTIONS.items():
        where = "; ".join(f"{c.number:02d} {'' if c.ready else '(planned) '}{c.title.split(':')[0]}"
                          + (f": {part(section, c.number)}" if part(section, c.number) else "")
                          for c in chapters_for(section))
        rows.append((section, question, where))
    return rows
