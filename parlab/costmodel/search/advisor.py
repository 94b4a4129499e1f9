"""The strategy advisor in plain words: ``advise`` ranks every plan with ``search`` and says why the
first one wins; ``guide_rule`` is the guide's decision rule for the same setting (guide 3.3-3.5
and its closing summary), and ``guide_scenarios`` sets the two side by side, with the numbers that
explain each agreement and disagreement.

The advice never comes from a rule: it is the fastest plan that fits, and the reasons are read off
the estimates (which term dominates, what the runner-up of another layout pays more). The guide's
rules are written down only to be checked against it.

    a = advise("llama-13b", make_cluster("pcie-10gbe", 8), 64)
    print(a.best.plan.describe()); print("\\n".join(a.reasons()))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from parlab.costmodel.plan.estimate import Estimate
from parlab.costmodel.plan.spec import OFFLOADS, Plan
from parlab.costmodel.search.guide_rules import (
    FAST_NETWORK_GBIT,
    GuideRule,
    fast_network,
    guide_rule,
    has_nvlink,
    is_plain_replica,
    largest_extra,
    layout,
)
from parlab.costmodel.search.ranking import SearchResult, search
from parlab.costmodel.specs._check import positive
from parlab.costmodel.specs.assumptions import DEFAULT, Assumptions
from parlab.costmodel.specs.bands import is_tie, margin_verdict
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import Cluster, make_cluster
from parlab.costmodel.specs.models import ModelSpec
from parlab.tables import human_bytes, plural


# -- the advice ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Advice:
    """The search's ranking of one setting and what it means in plain words.

    ``result`` ranks the plans that fit; ``offload_needed`` is True when none fit without CPU
    offload and the ranking is the second search, with offload allowed; ``plain_fits`` says whether
    a plain data-parallel replica (the whole model and its states on every GPU) fits."""

    model: ModelSpec
    cluster: Cluster
    global_batch: int
    result: SearchResult
    offload_needed: bool
    plain_fits: bool

    @property
    def best(self) -> Estimate:
        return self.result.best()

    def best_where(self, accepts: Callable[[Plan], bool]) -> Estimate | None:
        """The fastest fitting plan ``accepts`` (None: no plan of that kind fits)."""
        return next((e for e in self.result.ranked if accepts(e.plan)), None)

    def by_layout(self) -> list[Estimate]:
        """The fastest fitting plan of each layout (see ``layout``), fastest first."""
        seen: dict[str, Estimate] = {}
        for e in self.result.ranked:
            seen.setdefault(layout(e.plan), e)
        return list(seen.values())

    def runner_up(self) -> Estimate | None:
        """The fastest plan of another layout than the best's."""
        kind = layout(self.best.plan)
        return self.best_where(lambda p: layout(p) != kind)

    def reasons(self) -> list[str]:
        """Why the first plan, in plain words, each line with its numbers."""
        best = self.best
        out = [f"{self.result.counts()} ({self.cluster.gpu.name}, {human_bytes(self.cluster.gpu.memory_bytes)} each)."]
        if self.offload_needed:
            out.append("No plan fits in GPU memory on its own, so the search was repeated with the optimizer "
                       "states (and parameters) allowed on the CPU: offload is the price of fitting.")
        elif not self.plain_fits:
            out.append("A plain data-parallel replica (whole model and states on every GPU) does not fit: the "
                       "model must be split (ZeRO, TP or PP).")
        else:
            out.append("A plain data-parallel replica fits; splitting further is only worth it if it is faster.")
        terms = best.time_terms()
        top = sorted((t for t in terms if terms[t] > 0), key=terms.get, reverse=True)[:2]
        shares = ", ".join(f"{t} {terms[t]:.2f} s ({terms[t] / best.step_time:.0%})" for t in top)
        out.append(f"Fastest: {best.plan.describe()} ({layout(best.plan)}), {best.step_time:.2f} s per step, "
                   f"MFU {best.mfu:.0%}, {best.memory_total / 1e9:.0f} GB on its most loaded GPU; "
                   f"most of the step is {shares}.")
        if best.outside_validated:
            out.append("Outside the validated range (an extrapolation, ranked all the same): "
                       + "; ".join(best.outside_validated) + ".")
        where = best.time.facts.get("where", {})
        placed = [f"{dim.upper()} {w}" for dim, w in where.items() if w and w != "-"]
        if placed:
            out.append("Its groups talk over: " + "; ".join(placed) + ".")
        other = self.runner_up()
        if other is not None:
            term, extra = largest_extra(other, best)
            out.append(f"The fastest plan of another layout, {other.plan.describe()} ({layout(other.plan)}), "
                       f"takes {other.step_time:.2f} s ({other.step_time / best.step_time - 1:+.1%}): "
                       f"it pays {extra:.2f} s more {term}.")
        return out


def advise(model: str | ModelSpec, cluster: Cluster, global_batch: int, *, offload: bool | None = None,
           assumptions: Assumptions = DEFAULT, **choices) -> Advice:
    """Rank every plan of ``model`` on ``cluster`` with ``search`` and explain the first one.

    ``offload``: None (default) searches without CPU offload and, only if no plan fits, again with
    every offload mode (moving states over PCIe never shortens a step in this model: it adds the
    transfers and a CPU optimizer step; ZeRO-Offload, Ren et al. 2021); True always allows it;
    False never. ``choices`` narrow the enumeration as in ``search``."""
    model = get_model(model)
    positive("global_batch", global_batch, integer=True)
    if offload not in (None, True, False):
        raise TypeError(f"offload must be True, False or None (only if nothing fits without), got {offload!r}")
    modes = list(OFFLOADS) if offload else ["none"]
    result = search(model, cluster, global_batch, assumptions=assumptions, offload=modes, **choices)
    needed = False
    if offload is None and result.valid and not result.ranked:
        result = search(model, cluster, global_batch, assumptions=assumptions, offload=list(OFFLOADS), **choices)
        needed = bool(result.ranked)
    result.best()  # a ValueError naming why, when nothing fits even so
    plain = any(is_plain_replica(e.plan) for e in result.ranked)
    return Advice(model, cluster, global_batch, result, needed, plain)


@dataclass(frozen=True)
class Verdict:
    """The advisor beside the guide on one setting."""

    advice: Advice
    rule: GuideRule
    guides_best: Estimate | None  # the fastest plan of the guide's kind (None: none fits)

    @property
    def agrees(self) -> bool:
        return self.rule.accepts(self.advice.best.plan)

    @property
    def tie(self) -> bool:
        """The guide's kind loses, but by a margin inside the model's error band
        (``validation.is_tie``): the model cannot say the guide is wrong."""
        return not self.agrees and self.slowdown is not None and is_tie(self.slowdown)

    @property
    def outcome(self) -> str:
        """'agrees', 'tie' (the guide's kind within the band) or 'differs'."""
        return "agrees" if self.agrees else "tie" if self.tie else "differs"

    @property
    def slowdown(self) -> float | None:
        """How much longer the guide's best plan's step is than the advisor's (0 when they agree)."""
        if self.guides_best is None:
            return None
        return self.guides_best.step_time / self.advice.best.step_time - 1

    def why(self) -> str:
        """One sentence, with numbers: what the losing plan pays more, and on which term."""
        a = self.advice
        best = a.best
        if self.agrees:
            if a.offload_needed:
                return (f"only offload fits: the fastest plan needs {best.memory_total / 1e9:.0f} GB on the GPU "
                        f"and {plural(a.result.fitting, 'plan')} fit with it, none without")
            other = a.best_where(lambda p: not self.rule.accepts(p))
            if other is None:
                return "every plan that fits is of the guide's kind"
            term, extra = largest_extra(other, best)
            return (f"the fastest plan of another kind, {layout(other.plan)}, is "
                    f"{other.step_time / best.step_time - 1:.1%} slower: {extra:.2f} s more {term}")
        g = self.guides_best
        if g is None:
            return f"no plan of the guide's kind ({self.rule.says}) fits in memory"
        term, extra = largest_extra(g, best)
        return (f"the guide's kind, best {g.plan.describe()}, is {margin_verdict(self.slowdown)}; "
                f"it pays {extra:.2f} s more {term}")


def verdict(advice: Advice) -> Verdict:
    """The guide's rule for the advice's setting and the fastest plan it allows."""
    rule = guide_rule(advice.cluster, advice.plain_fits)
    return Verdict(advice, rule, advice.best_where(rule.accepts))


# -- the scenarios of guide 3.3-3.5 ----------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    """One setting of the guide's decision rules: a model on a cluster at a global batch."""

    model: str
    kind: str
    n_gpus: int
    global_batch: int
    inter: str | None = None  # override of the cluster kind's inter-node link
    nics_per_node: int | None = None

    def cluster(self) -> Cluster:
        return make_cluster(self.kind, self.n_gpus, inter=self.inter, nics_per_node=self.nics_per_node)

    def describe(self) -> str:
        """'llama-13b on 16 x pcie-10gbe' (with the link override when there is one)."""
        net = f" with {self.nics_per_node or ''}{' x ' if self.nics_per_node else ''}{self.inter}" if self.inter else ""
        return f"{self.model} on {self.n_gpus} x {self.kind}{net}"


#: one setting per branch of guide 3.3-3.5 and its summary, plus the two where the advisor disagrees
SCENARIOS: tuple[Scenario, ...] = (
    Scenario("1.3B", "dgx-a100", 1, 8),
    Scenario("llama-7b", "dgx-a100", 1, 8),
    Scenario("1.3B", "dgx-a100", 8, 64),
    Scenario("llama-13b", "dgx-a100", 8, 64),
    Scenario("llama-13b", "pcie-10gbe", 8, 64),
    Scenario("llama-7b", "pcie-10gbe", 8, 64),
    Scenario("llama-13b", "dgx-a100", 16, 128),
    Scenario("llama-13b", "dgx-a100", 16, 128, inter="25gbe", nics_per_node=1),
    Scenario("llama-13b", "pcie-10gbe", 16, 128),
    Scenario("llama-65b", "pcie-10gbe", 32, 256),
)

#: the scenario table narrows the search to micro-batches of 1, 2 and 4 sequences to stay fast
#: (larger ones never win on these settings: they only grow the activations)
SCENARIO_CHOICES = {"micro_batches": (1, 2, 4)}


def scenario_verdict(scenario: Scenario, assumptions: Assumptions = DEFAULT) -> Verdict:
    """The advisor and the guide on one scenario (cached: a table, a figure and a dashboard share it)."""
    return _scenario_verdict(scenario, assumptions)


@lru_cache(maxsize=64)
def _scenario_verdict(scenario: Scenario, assumptions: Assumptions) -> Verdict:
    advice = advise(scenario.model, scenario.cluster(), scenario.global_batch, assumptions=assumptions,
                    **SCENARIO_CHOICES)
    return verdict(advice)


def guide_scenarios(scenarios: tuple[Scenario, ...] = SCENARIOS,
                    assumptions: Assumptions = DEFAULT) -> list[tuple[Scenario, Verdict]]:
    """Each scenario with the advisor's verdict beside the guide's rule."""
    return [(s, scenario_verdict(s, assumptions)) for s in scenarios]


SCENARIO_HEADERS = ["guide", "situation", "example", "guide says", "advisor's plan", "agrees",
                    "step (s)", "guide's kind (s)", "why", "validated range"]


def validated_mark(est: Estimate) -> str:
    """'yes', or 'outside: ' and the reasons the estimate leaves the validated range
    (``Estimate.outside_validated``): the advisor's table prints it beside each plan."""
    return "outside: " + "; ".join(est.outside_validated) if est.outside_validated else "yes"


def scenario_rows(scenarios: tuple[Scenario, ...] = SCENARIOS,
                  assumptions: Assumptions = DEFAULT) -> list[list[object]]:
    """Rows under ``SCENARIO_HEADERS``: per scenario the guide's section, situation and advice, the
    advisor's fastest plan, whether the guide's rule allows it, the two step times (None where no
    plan of the guide's kind fits), why, with numbers, and whether the advisor's plan lies inside the
    validated range (``validated_mark``)."""
    rows = []
    for s, v in guide_scenarios(scenarios, assumptions):
        best = v.advice.best
        g = v.guides_best
        rows.append([v.rule.section, v.rule.situation, s.describe(), v.rule.says,
                     f"{best.plan.describe()} ({layout(best.plan)})", {"agrees": "yes", "tie": "tie", "differs": "no"}[v.outcome],
                     round(best.step_time, 2), round(g.step_time, 2) if g is not None else None, v.why(),
                     validated_mark(best)])
    return rows


def decision_branches() -> list[tuple[tuple[str, ...], GuideRule]]:
    """The guide's decision tree (3.3-3.5 and its summary) as (answers from the root, rule) per leaf,
    each rule taken from ``guide_rule`` on a representative cluster, so the tree a figure draws is
    the rule the scenarios are checked against."""
    one, node, pcie = make_cluster("dgx-a100", 1), make_cluster("dgx-a100", 8), make_cluster("pcie-10gbe", 8)
    fast, slow = make_cluster("dgx-a100", 16), make_cluster("dgx-a100", 16, inter="25gbe", nics_per_node=1)
    poor = make_cluster("pcie-10gbe", 16)
    return [
        (("one GPU", "fits"), guide_rule(one, True)),
        (("one GPU", "does not fit"), guide_rule(one, False)),
        (("one node", "fits on one GPU"), guide_rule(node, True)),
        (("one node", "does not fit", "NVLink"), guide_rule(node, False)),
        (("one node", "does not fit", "no NVLink"), guide_rule(pcie, False)),
        (("several nodes", "fast network"), guide_rule(fast, False)),
        (("several nodes", "slow network", "NVLink"), guide_rule(slow, False)),
        (("several nodes", "slow network", "no NVLink"), guide_rule(poor, False)),
    ]


__all__ = [
    "FAST_NETWORK_GBIT", "SCENARIOS", "SCENARIO_CHOICES", "SCENARIO_HEADERS", "Advice", "GuideRule", "Scenario",
    "Verdict", "advise", "decision_branches", "fast_network", "guide_rule", "guide_scenarios", "has_nvlink",
    "is_plain_replica", "largest_extra", "layout", "scenario_rows", "scenario_verdict", "validated_mark", "verdict",
]
