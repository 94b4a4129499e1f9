"""Many plans: ``search`` ranks every valid plan of a model on a cluster (``ranking``), and the
advisor (``advisor``) answers the guide's "which strategy" questions with it, checked against the
guide's own rules (``guide_rules``). Imports ``specs``,
``pricing`` and ``plan``.
"""

from parlab.costmodel.search.ranking import SearchResult, candidate_plans, factorizations, search

__all__ = ["SearchResult", "candidate_plans", "factorizations", "search"]
