"""The guide's section headings (titles only, in Chinese), shown beside each drill question.

Decision: both. When the guide file is beside the checkout (``GUIDE_FILE``), ``title()`` reads
its heading lines (once, cached) and shows them, so what the learner sees is the guide's own
heading; the headings are also stored here as data (``TITLES``), the fallback that keeps the
drill working in an installed package or a checkout without the file (``from_guide=False``
skips the file). tests/test_drill.py fails if the stored titles and the file's headings ever
differ. Only the heading line of each section is kept, never the guide's body text.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

#: where the guide lives beside the checkout (as tests/test_course.py finds it)
GUIDE_FILE = Path(__file__).resolve().parents[3] / "shared" / "guide" / "interview_guide_zh.txt"

_HEADING = re.compile(r"^(\d\.\d+) \S.*$", re.MULTILINE)

#: guide section -> its heading line, as the guide writes it
TITLES: dict[str, str] = {
    "1.1": "1.1 训练大语言模型存在什么问题？",
    "1.2": "1.2 什么是点对点通信？",
    "1.3": "1.3 什么是集体通信？",
    "1.4": "1.4 什么是数据并行？",
    "1.5": "1.5 数据并行如何提升效率？",
    "1.6": "1.6 什么是流水线并行？",
    "1.7": "1.7 什么是张量并行（intra-layer）？",
    "1.8": "1.8 数据并行 vs 张量并行 vs 流水线并行？",
    "1.9": "1.9 什么是3D并行？",
    "1.10": "1.10 想要训练1个LLM，如果只想用1张显卡，那么对显卡的要求是什么？",
    "1.11": "1.11 如果有N张显存足够大的显卡，怎么加速训练？",
    "1.12": "1.12 如果显卡的显存不够装下一个完整的模型呢？",
    "1.13": "1.13 PP推理时，是一个串行的过程，1个GPU计算，其他空闲，有没有其他方式？",
    "1.14": "1.14 3种并行方式可以叠加吗？",
    "1.15": "1.15 Colossal-AI有1D/2D/2.5D/3D，是什么情况？",
    "1.16": "1.16 除了3D并行有没有其他方式大规模训练？",
    "1.17": "1.17 有了ZeRO系列，为什么还需要3D并行？",
    "1.18": "1.18 平民适不适合玩3D并行？",
    "1.19": "1.19 平民适不适合直接上多机多卡的ZeRO-3（万兆网）？",
    "1.20": "1.20 分布式并行及显存优化技术有哪些，都有什么特点？",
    "1.21": "1.21 显存优化技术有哪些，都有什么特点？",
    "1.22": "1.22 常见的分布式训练框架有哪些，都有什么特点？",
    "2.1": "2.1 假如有超多的8卡A100节点（DGX A100），如何应用3D并行策略？",
    "2.2": "2.2 如果想构建这样一个大规模并行训练系统，训练框架如何选？",
    "2.3": "2.3 训练框架如何选？",
    "3.1": "3.1 如何选择一款分布式训练框架？",
    "3.2": "3.2 如何选择技术栈？",
    "3.3": "3.3 单GPU",
    "3.4": "3.4 单节点多卡",
    "3.5": "3.5 多节点多卡",
    "4.1": "4.1 推理速度验证",
    "4.2": "4.2 并行化训练加速",
    "4.3": "4.3 DeepSpeed训练过程，报找不到主机",
    "4.4": "4.4 为什么多机训练效率不如单机？",
    "4.5": "4.5 多机训练不通，DeepSpeed配置问题",
}


def guide_titles(path: str | Path | None = None) -> dict[str, str]:
    """Section -> heading line read from the guide file (``GUIDE_FILE`` by default); {} when the
    file is not there."""
    file = Path(path) if path is not None else GUIDE_FILE
    if not file.is_file():
        return {}
    return _read(str(file))


@lru_cache(maxsize=4)
def _read(file: str) -> dict[str, str]:
    text = Path(file).read_text(encoding="utf-8")
    return {m.group(1): m.group(0).strip() for m in _HEADING.finditer(text)}


def title(section: str, from_guide: bool = True) -> str:
    """The heading of guide ``section``: the guide file's when it is there and ``from_guide``,
    else the stored one."""
    if section not in TITLES:
        raise ValueError(f"unknown guide section {section!r}; allowed: {', '.join(TITLES)}")
    if from_guide:
        return guide_titles().get(section, TITLES[section])
    return TITLES[section]
