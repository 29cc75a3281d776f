"""Gates: thresholds a run must meet, each returning a reason.

- ``fail_under`` ``{metric: value}`` (CLI ``--fail-under METRIC=VALUE``):
  fails when the run's mean is *under* the value. Only for higher-is-better
  metrics.
- ``fail_over`` ``{metric: value}`` (CLI ``--fail-over METRIC=VALUE``): fails
  when the mean is *over* the value. Only for lower-is-better metrics.

  The names say literally what fails, and each is accepted only in the
  direction where it means "worse than": a ``--fail-under`` on a
  lower-is-better metric would fail on improvements, so it is refused as a
  usage error (exit 2) naming the flag to use instead.
- ``max_regression`` (CLI ``--max-regression X`` or ``METRIC=X``, with the
  baseline being the compared run or ``--baseline FILE``): fails when a
  metric got worse than the baseline, read through its direction, by more
  than X. ``X`` is absolute in the metric's units (``0.02``) or relative to
  the baseline mean with a ``%`` suffix (``2%``). A metric that is not
  comparable fails the gate (it cannot be checked), except a metric that only
  the candidate has (nothing to regress from) under the all-metrics form.

A failed gate is reported with its reason; the CLI then exits 1
(``GateFailed``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..core.metric import Direction
from ..core.result import RunResult
from ..errors import ConfigError


@dataclass(frozen=True)
class Limit:
    """A regression limit: absolute (metric units) or relative to the baseline."""

    value: float
    relative: bool = False

    @classmethod
    def parse(cls, v: Any, what: str = "threshold") -> "Limit":
        if isinstance(v, Limit):
            return v
        if isinstance(v, bool):
            raise ConfigError(f"{what}: expected a number or a percentage, got {v!r}")
        if isinstance(v, (int, float)):
            number, rel = float(v), False
        elif isinstance(v, str):
            s = v.strip()
            rel = s.endswith("%")
            try:
                number = float(s[:-1]) / 100 if rel else float(s)
            except ValueError:
                raise ConfigError(f"{what}: {v!r} is not a number or a percentage such as 0.02 or 2%") from None
        else:
            raise ConfigError(f"{what}: expected a number or a percentage, got {type(v).__name__}")
        if not math.isfinite(number) or number < 0:
            raise ConfigError(f"{what}: {v!r} must be a non-negative finite number")
        return cls(number, rel)

    def measure(self, regression: float, baseline: float | None) -> float:
        """The regression in this limit's terms (relative: over |baseline|;
        infinite when the baseline is 0 and the run got worse)."""
        if not self.relative:
            return regression
        if regression <= 0:
            return 0.0
        if baseline is None or baseline == 0:
            return math.inf
        return regression / abs(baseline)

    def exceeded(self, regression: float, baseline: float | None) -> bool:
        return self.measure(regression, baseline) > self.value

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"


@dataclass
class GateResult:
    gate: str
    run: str
    metric: str | None
    passed: bool
    reason: str


# ----------------------------------------------------------------------------- parsing
def parse_assignments(items: Iterable[str] | None, flag: str) -> dict[str, float]:
    """``["exact_match=0.7", ...]`` -> ``{"exact_match": 0.7}``."""
    out: dict[str, float] = {}
    for item in items or []:
        name, sep, value = str(item).rpartition("=")
        if not sep or not name.strip():
            raise ConfigError(f"{flag} {item!r}: expected METRIC=VALUE")
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"{flag} {item!r}: {value!r} is not a number") from None
        if not math.isfinite(number):
            raise ConfigError(f"{flag} {item!r}: the value must be finite")
        out[name.strip()] = number
    return out


def parse_max_regression(items: Iterable[str] | None) -> dict[str | None, Limit]:
    """``["0.02"]`` (every metric), ``["exact_match=2%"]`` (one metric), or both."""
    out: dict[str | None, Limit] = {}
    for item in items or []:
        name, sep, value = str(item).rpartition("=")
        key = name.strip() if sep else None
        if sep and not key:
            raise ConfigError(f"--max-regression {item!r}: expected X or METRIC=X")
        out[key] = Limit.parse(value if sep else item, f"--max-regression {item!r}")
    return out


def normalize_max_regression(v: Any) -> dict[str | None, Limit]:
    """Python-API form: a number / "2%" / Limit for every metric, or a mapping
    of metric -> limit (key ``None`` or ``"*"`` for every metric)."""
    if v is None:
        return {}
    if isinstance(v, Mapping):
        return {(None if k in (None, "*") else str(k)): Limit.parse(x, f"max_regression[{k!r}]") for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return parse_max_regression([str(x) for x in v])
    return {None: Limit.parse(v, "max_regression")}


# ----------------------------------------------------------------------------- threshold gates
def validate_threshold_gates(runs: Iterable[RunResult], fail_under: Mapping[str, float],
                             fail_over: Mapping[str, float]) -> None:
    """Refuse a gate on a metric that no run has (a typo: usage error, exit 2, with the nearest names) or set
    against its metric's direction (exit 2)."""
    runs = list(runs)
    have = {m for run in runs for m in run.metrics}
    for flag, gates in (("--fail-under", fail_under), ("--fail-over", fail_over)):
        for name in gates:
            if name not in have:
                from ..core.suggest import did_you_mean

                raise ConfigError(f"{flag} {name}={gates[name]:g}: no run has a metric {name!r}"
                                  f"{did_you_mean(name, have)} (metrics: {', '.join(sorted(have)) or 'none'})")
    for run in runs:
        for name in fail_under:
            s = run.metrics.get(name)
            if s is not None and s.direction is Direction.MINIMIZE:
                raise ConfigError(
                    f"--fail-under {name}={fail_under[name]:g}: {name} is lower-is-better, so a floor would fail on "
                    f"improvements; use --fail-over {name}=VALUE (fails when the mean exceeds VALUE)"
                )
        for name in fail_over:
            s = run.metrics.get(name)
            if s is not None and s.direction is Direction.MAXIMIZE:
                raise ConfigError(
                    f"--fail-over {name}={fail_over[name]:g}: {name} is higher-is-better, so a ceiling would fail on "
                    f"improvements; use --fail-under {name}=VALUE (fails when the mean is under VALUE)"
                )


def threshold_gates(run: RunResult, label: str, fail_under: Mapping[str, float],
                    fail_over: Mapping[str, float]) -> list[GateResult]:
    out: list[GateResult] = []
    for flag, gates, under in (("--fail-under", fail_under, True), ("--fail-over", fail_over, False)):
        for name, limit in gates.items():
            gate = f"{flag} {name}={limit:g}"
            s = run.metrics.get(name)
            if s is None:
                have = ", ".join(sorted(run.metrics)) or "none"
                out.append(GateResult(gate, label, name, False,
                                      f"{label}: {name} is not in the run (metrics: {have}) [{gate}]"))
                continue
            if s.mean is None:
                out.append(GateResult(gate, label, name, False, f"{label}: {name} has no scored samples [{gate}]"))
                continue
            bad = s.mean < limit if under else s.mean > limit
            word = ("under" if under else "over") if bad else ("at least" if under else "at most")
            reason = f"{label}: {name} = {s.mean:.4f} is {word} {limit:g} [{gate}]"
            out.append(GateResult(gate, label, name, not bad, reason))
    return out


# ----------------------------------------------------------------------------- regression gates
def regression_gates(comparison: Any, limits: Mapping[str | None, Limit]) -> list[GateResult]:
    """Check ``max_regression`` limits against a ``Comparison``."""
    out: list[GateResult] = []
    if not limits:
        return out
    base, cand = comparison.baseline.label, comparison.candidate.label
    for name in [k for k in limits if k is not None and k not in comparison.metrics]:
        from ..core.suggest import did_you_mean

        raise ConfigError(f"--max-regression {name}={limits[name]}: neither {base} nor {cand} has a metric {name!r}"
                          f"{did_you_mean(name, comparison.metrics)} (metrics: "
                          f"{', '.join(sorted(comparison.metrics)) or 'none'})")
    for name, mc in comparison.metrics.items():
        limit = limits.get(name, limits.get(None))
        if limit is None:
            continue
        gate = f"--max-regression {name + '=' if name in limits else ''}{limit}"
        if not mc.comparable:
            if (name not in limits and mc.baseline_mean is None and mc.baseline_n == 0
                and mc.reasons == ["metric missing in the baseline run"]):
                continue  # a new metric: nothing to regress from
            out.append(GateResult(gate, cand, name, False,
                                  f"{cand}: {name} cannot be checked against {base}: not comparable "
                                  f"({'; '.join(mc.reasons)}) [{gate}]"))
            continue
        if mc.regression is None:
            out.append(GateResult(gate, cand, name, False, f"{cand}: {name} has no mean in one of the runs, "
                                                           f"so its regression cannot be checked [{gate}]"))
            continue
        measured = limit.measure(mc.regression, mc.baseline_mean)
        if limit.relative:
            shown = f"{measured * 100:.2f}%" if math.isfinite(measured) else "inf% (baseline is 0)"
        else:
            shown = f"{measured:.4f}"
        if limit.exceeded(mc.regression, mc.baseline_mean):
            reason = (f"{cand}: {name} regressed by {shown} vs {base} "
                      f"({mc.baseline_mean:.4f} -> {mc.candidate_mean:.4f}, {mc.direction.arrow}), "
                      f"over the limit {limit} [{gate}]")
            out.append(GateResult(gate, cand, name, False, reason))
        else:
            out.append(GateResult(gate, cand, name, True,
                                  f"{cand}: {name} regression {shown} is within {limit} [{gate}]"))
    return out
