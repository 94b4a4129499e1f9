"""How a prediction misses a measurement: one row's signed error (``VsMeasured``) and a set's
(``ErrorSummary``), shared by every table of ``answers.validation``."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.plan.estimate import Estimate


class VsMeasured:
    """A row's predicted TFLOP/s per GPU (its ``estimate``) and the signed relative error against
    its ``measured`` TFLOP/s per GPU: (predicted - measured) / measured."""

    estimate: Estimate
    measured: float

    @property
    def predicted(self) -> float:
        return self.estimate.hardware_tflops_per_gpu

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return self.predicted / self.measured - 1


@dataclass(frozen=True)
class ErrorSummary:
    """How a set of predictions misses its measurements: the signed relative errors, how many are
    high, their mean (the bias) and the largest in size, against the ``band`` the tests hold."""

    errors: tuple[float, ...]
    band: float

    @property
    def n(self) -> int:
        return len(self.errors)

    @property
    def high(self) -> int:
        """How many predictions are above their measurement."""
        return sum(e > 0 for e in self.errors)

    @property
    def mean(self) -> float:
        """Mean signed error: the systematic part (a bias), as opposed to scatter."""
        return sum(self.errors) / self.n

    @property
    def worst(self) -> float:
        """The signed error of largest size."""
        return max(self.errors, key=abs)

    @property
    def within_band(self) -> bool:
        return all(abs(e) < self.band for e in self.errors)

    def describe(self, what: str) -> str:
        inside = "all within" if self.within_band else "NOT all within"
        return (f"{what}: {self.high} of {self.n} predictions high, mean error {self.mean:+.1%}, "
                f"largest {self.worst:+.1%}; {inside} the tested ±{self.band:.0%}")
