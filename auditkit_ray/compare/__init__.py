"""Direction-aware comparison, leaderboards and paired statistics.

Pure functions over stored RunResults and their per-sample tables (no Ray):

- ``compare(baseline, candidate, ...)`` -> ``Comparison``: per metric the
  delta, the regression read through the metric's direction, retention, a
  grade with its reasons, and a paired test over the shared samples;
- ``leaderboard(runs, ...)`` -> ``Leaderboard``: ranking, intervals, winners
  and ties, pairwise Holm-adjusted tests, quality vs cost and Pareto fronts;
- gates (``fail_under``, ``fail_over``, ``max_regression``) whose failures
  raise ``GateFailed`` through ``raise_for_failures()``.

numpy, scipy and pyarrow load inside the functions that need them.

``auditkit_ray.compare`` is both this package and, on the facade, the
``compare`` function; importing the package replaces the facade attribute
with the module, so the module is made callable (it forwards to
``compare``) and ``auditkit_ray.compare(a, b)`` works either way.
"""

from __future__ import annotations

import sys
import types

from .comparison import Comparison, MetricComparison, RunRef, Thresholds, compare, retention
from .cost import AXES as COST_AXES
from .cost import CostRow, ParetoFront, pareto_front
from .gates import GateResult, Limit, parse_assignments, parse_max_regression
from .leaderboard import Entry, FailedCell, Leaderboard, MetricBoard, PairwiseCell, failed_cells_of, leaderboard
from .pairs import PairedStats, SampleDiff
from .samples import LoadedRun, load

__all__ = [
    "COST_AXES", "Comparison", "CostRow", "Entry", "FailedCell", "GateResult", "Leaderboard", "Limit", "LoadedRun",
    "MetricBoard",
    "MetricComparison", "PairedStats", "PairwiseCell", "ParetoFront", "RunRef", "SampleDiff", "Thresholds", "compare",
    "failed_cells_of", "leaderboard", "load", "pareto_front", "parse_assignments", "parse_max_regression", "retention",
]


class _CallableModule(types.ModuleType):
    def __call__(self, baseline, candidate, **kwargs):
        return compare(baseline, candidate, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
