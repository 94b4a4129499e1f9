"""ipywidgets dashboards over the engines: knobs in, a table and a figure out (see ``base``)."""

from .base import Dashboard
from .comm import CommTimeDashboard
from .drill import DrillDashboard
from .pipeline import PipelineDashboard
from .plan import PlanDashboard, SearchDashboard
from .walls import ComputeWallDashboard, MemoryWallDashboard

__all__ = ["CommTimeDashboard", "ComputeWallDashboard", "Dashboard", "DrillDashboard", "MemoryWallDashboard",
           "PipelineDashboard", "PlanDashboard", "SearchDashboard"]
