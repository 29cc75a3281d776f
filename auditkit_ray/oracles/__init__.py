"""Outcome oracles: the headline of an agent evaluation.

``Oracle`` has one required method, ``verdict(sample, generation, context) ->
Verdict`` (success | failure | unknown | error, with reason and evidence);
``OracleMetric`` / ``oracle_metric`` run any oracle as a Metric. Built-ins
live in ``auditkit_ray.oracles.builtin`` (imported on first use).
"""

from .base import GenericOracle, Oracle, OracleMetric, Outcome, Verdict, oracle_metric

__all__ = ["GenericOracle", "Oracle", "OracleMetric", "Outcome", "Verdict", "oracle_metric"]
