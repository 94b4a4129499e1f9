"""ipywidgets dashboards over the engines: knobs in, a table and a figure out (see ``base``)."""

from .advisor import AdvisorDashboard
from .base import Dashboard
from .beyond_3d import FiveDDashboard
from .comm import CommTimeDashboard
from .data_parallel import DataParallelDashboard
from .drill import DrillDashboard
from .inference import InferenceDashboard
from .memory_opt import MemoryOptDashboard
from .pipeline import PipelineDashboard
from .plan import PlanDashboard, SearchDashboard
from .tensor import TensorParallelDashboard
from .three_d import ThreeDDashboard
from .walls import ComputeWallDashboard, MemoryWallDashboard
from .zero import ZeroDashboard

__all__ = ["AdvisorDashboard", "CommTimeDashboard", "ComputeWallDashboard", "Dashboard", "DataParallelDashboard", "DrillDashboard",
           "FiveDDashboard",
           "InferenceDashboard", "MemoryOptDashboard", "MemoryWallDashboard", "PipelineDashboard",
           "PlanDashboard", "SearchDashboard", "TensorParallelDashboard", "ThreeDDashboard",
           "ZeroDashboard"]
