"""Agent trajectory diagnostics: tool-call matching, turn structure, order,
argument correctness, redundancy, loops, schema validity, permissions and
irrelevance.

These measure how the agent got there, not whether the task succeeded; the
headline of an agent evaluation is an outcome oracle (``auditkit_ray.oracles``).
Semantics are documented in ``auditkit_ray.agents.matching`` and
``auditkit_ray.agents.structure`` and in docs/agents.md. Common rules:

* a sample without a reference (``reference_tool_calls`` or
  ``metadata.reference_routes``) is ``not_tested`` for reference metrics;
* a generation without a recorded trace (``tool_calls is None``) is
  ``unknown``; so is one whose call arguments were not recorded, for metrics
  that read arguments;
* a ratio whose denominator is 0 is ``not_tested`` with the reason, never 0;
* empty lists are evidence, not absence: ``tool_calls == []`` is an agent
  that made no call (recall 0 against a reference with calls),
  ``reference_tool_calls == []`` a reference that expects none and
  ``tools == []`` an offer of no tool (every call invalid); the table in
  docs/metrics-notes.md ("Empty lists") lists each case;
* alternative routes: the best route is chosen by F1, then fewest calls, then
  first listed; its index is in the score's metadata.
"""

from __future__ import annotations

from typing import Any

from ..agents.matching import ARGUMENT_MODES, CallMatcher, MatchResult, best_route, match_calls
from ..agents.structure import (
    in_order_subsequence,
    loops,
    pairwise_order,
    parallel_stats,
    redundancy,
    strict_order,
)
from ..agents.trace import Trace, generation_trace, reference_routes, sample_field
from ..core.metric import Direction, Metric, MissingEvidence
from ..core.types import Generation, Sample, Score, Status


def _maybe(name: str, value: float | None, why: str, **meta: Any) -> Score:
    if value is None:
        return Score.not_tested(name, why, metadata=meta)
    return Score.scored(name, value, metadata=meta)


class _AgentMetric(Metric, abstract=True):
    """``requires`` names Sample agent fields, read from the Sample or (for a
    sample from the generic reader) from its metadata; ``reference_tool_calls``
    is also satisfied by ``metadata.reference_routes``. An absent one gives
    not_tested. The trace is not a requirement: a missing trace is unknown."""

    family = "agent"
    #: the named scores of a metric that returns several (empty: one score)
    outputs: tuple[str, ...] = ()

    def evaluate_batch(self, items: list[tuple[Sample, Generation, dict]]) -> list[list[Score]]:
        """As Metric's, but a sample that is not scored (not_tested, unknown,
        error) gets that status under each named score, so that every
        summary counts it."""
        out = super().evaluate_batch(items)
        if not self.outputs:
            return out
        fanned = []
        for scores in out:
            if len(scores) == 1 and scores[0].name == self.output_name and scores[0].status is not Status.SCORED:
                s = scores[0]
                scores = [s.model_copy(update={"name": f"{self.output_name}.{k}"}) for k in self.outputs]
            fanned.append(scores)
        return fanned

    def missing_requirements(self, sample: Sample, generation: Generation | None, context: dict | None) -> list[str]:
        missing = []
        for f in self.requires:
            if sample_field(sample, f) is not None:
                continue
            if f == "reference_tool_calls" and (sample.metadata or {}).get("reference_routes"):
                continue
            missing.append(f)
        return missing

    def trace(self, generation: Generation) -> Trace:
        return generation_trace(generation)


class _MatchingMetric(_AgentMetric, abstract=True):
    requires = ("reference_tool_calls",)
    default_arguments = "exact"

    def __init__(self, *, arguments: str | None = None, comparator: str | None = None,
                 comparator_version: str | None = None, turn_mode: str = "flat", as_name: str | None = None) -> None:
        arguments = arguments or self.default_arguments
        if comparator is None and arguments not in ARGUMENT_MODES:
            raise TypeError(f"arguments must be one of {', '.join(ARGUMENT_MODES)}, got {arguments!r}")
        if comparator is not None and not (isinstance(comparator, str) and ":" in comparator):
            raise TypeError("comparator must be 'package.module:function'")
        if turn_mode not in ("flat", "aligned"):
            raise TypeError(f"turn_mode must be 'flat' or 'aligned', got {turn_mode!r}")
        params: dict[str, Any] = {"arguments": arguments, "turn_mode": turn_mode}
        if comparator is not None:
            params.update(comparator=comparator, comparator_version=comparator_version)
        super().__init__(**params, as_name=as_name)

    def matcher(self, sample: Sample) -> CallMatcher:
        return CallMatcher(self.params["arguments"], self.params.get("comparator"), sample_field(sample, "tools"))

    def routes(self, sample: Sample) -> list:
        routes = reference_routes(sample)
        if not routes:
            raise MissingEvidence("the sample has no reference route")
        return routes

    def best(self, sample: Sample, trace: Trace, matcher: CallMatcher) -> MatchResult:
        if matcher.uses_arguments:
            trace.require_arguments()
        return best_route(self.routes(sample), trace.turns, matcher, turn_mode=self.params["turn_mode"])


class ToolCallMatch(_MatchingMetric):
    """Tool-call precision, recall, F1 and exact set match (maximum bipartite matching)."""

    name = "tool_call_match"
    direction = Direction.MAXIMIZE
    outputs = ("precision", "recall", "f1", "exact_set")
    description = "tool-call precision/recall/F1/exact set by maximum bipartite matching, order-free within a turn"

    def score(self, sample: Sample, generation: Generation, context: dict) -> dict[str, Score]:
        matcher = self.matcher(sample)
        m = self.best(sample, self.trace(generation), matcher)
        ev = m.evidence()
        return {
            "precision": _maybe("precision", m.precision, "the agent made no call (no denominator)", **ev),
            "recall": _maybe("recall", m.recall, "the reference has no call (no denominator)", **ev),
            "f1": _maybe("f1", m.f1, "neither the agent nor the reference made a call", **ev),
            "exact_set": Score.scored("exact_set", 1.0 if m.exact_set else 0.0, metadata=ev),
        }


class ArgumentCorrectness(_MatchingMetric):
    """Of the agent's calls paired by tool name with reference calls, the
    fraction whose arguments are right (``arguments``: exact, subset, bfcl or
    a comparator)."""

    name = "argument_correctness"
    direction = Direction.MAXIMIZE
    description = "fraction of name-matched calls whose arguments are correct"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.params["arguments"] == "name" and "comparator" not in self.params:
            raise TypeError("argument_correctness needs an argument mode other than 'name'")

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        trace = self.trace(generation)
        trace.require_arguments()
        matcher = self.matcher(sample)
        chosen = best_route(self.routes(sample), trace.turns, matcher, turn_mode=self.params["turn_mode"])
        m = match_calls(self.routes(sample)[chosen.route], trace.turns, matcher,
                        turn_mode=self.params["turn_mode"], name_tier=True)
        correct = sum(1 for t in m.tiers.values() if t == 0)
        return _maybe(self.name, correct / len(m.pairs) if m.pairs else None,
                      "no agent call shares a tool name with a reference call",
                      route=chosen.route, correct=correct, name_matched=len(m.pairs))


class ToolChainOrder(_MatchingMetric):
    """Whether the agent called the tools in the reference order: in-order
    subsequence, strict turn-for-turn equality and the pairwise order rate."""

    name = "tool_chain_order"
    direction = Direction.MAXIMIZE
    outputs = ("subsequence", "strict", "pairwise")
    default_arguments = "name"
    description = "tool order vs the reference: in-order subsequence, strict, pairwise"

    def score(self, sample: Sample, generation: Generation, context: dict) -> dict[str, Score]:
        trace = self.trace(generation)
        matcher = self.matcher(sample)
        if matcher.uses_arguments:
            trace.require_arguments()
        chosen = best_route(self.routes(sample), trace.turns, matcher)
        route = self.routes(sample)[chosen.route]
        m = match_calls(route, trace.turns, matcher, name_tier=matcher.uses_arguments)
        pw, kept, total = pairwise_order(m)
        meta = {"route": chosen.route}
        return {
            "subsequence": Score.scored(
                "subsequence", float(in_order_subsequence(route, trace.turns, matcher)), metadata=meta
            ),
            "strict": Score.scored("strict", float(strict_order(route, trace.turns, matcher)), metadata=meta),
            "pairwise": _maybe(
                "pairwise",
                pw,
                "no matched pair of calls from different reference turns",
                kept=kept,
                pairs=total,
                **meta,
            ),
        }


class ParallelCalls(_MatchingMetric):
    """Parallel-call structure: independent reference calls the agent split
    across turns (recall, detection) and dependent calls it batched too early
    (precision). Pairs calls by name, preferring pairs whose arguments match."""

    name = "parallel_calls"
    direction = Direction.MAXIMIZE
    outputs = ("recall", "precision", "detection")
    description = "parallel recall/detection (independent calls kept together) and precision (no premature batching)"

    def score(self, sample: Sample, generation: Generation, context: dict) -> dict[str, Score]:
        trace = self.trace(generation)
        matcher = self.matcher(sample)
        if matcher.uses_arguments:
            trace.require_arguments()
        chosen = best_route(self.routes(sample), trace.turns, matcher, turn_mode="flat")
        route = self.routes(sample)[chosen.route]
        m = match_calls(route, trace.turns, matcher, name_tier=matcher.uses_arguments)
        st = parallel_stats(m)
        meta = {"route": chosen.route, **{k: v for k, v in st.items() if k not in ("recall", "precision", "detection")}}
        return {
            "recall": _maybe(
                "recall", st["recall"], "no matched pair of independent (same-turn) reference calls", **meta
            ),
            "precision": _maybe(
                "precision", st["precision"], "the agent batched no pair of matched calls in one turn", **meta
            ),
            "detection": _maybe(
                "detection", st["detection"], "no reference turn with two or more matched calls", **meta
            ),
        }


class RedundancyRatio(_AgentMetric):
    """Fraction of the agent's calls that repeat an earlier identical call."""

    name = "redundancy_ratio"
    direction = Direction.MINIMIZE
    description = "fraction of calls repeating an earlier identical call (same tool and arguments)"

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        trace = self.trace(generation)
        trace.require_arguments()
        ratio, redundant, total = redundancy(trace.turns, trace.malformed)
        return _maybe(self.name, ratio, "the agent made no call", redundant=redundant, calls=total)


class LoopFrequency(_AgentMetric):
    """Fraction of turn transitions where the agent repeats the calls of one of
    the ``window`` previous turns (default 1: the turn just before)."""

    name = "loop_frequency"
    direction = Direction.MINIMIZE
    description = "fraction of turns repeating a previous turn's calls (stuck in a loop)"

    def __init__(self, *, window: int = 1, as_name: str | None = None) -> None:
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise TypeError(f"window must be a positive integer, got {window!r}")
        super().__init__(window=window, as_name=as_name)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        trace = self.trace(generation)
        trace.require_arguments()
        freq, looping, transitions = loops(trace.turns, self.params["window"])
        return _maybe(
            self.name, freq, "fewer than two turns with calls", looping_turns=looping, transitions=transitions
        )


class ToolCallValidity(_AgentMetric):
    """Fraction of the agent's calls that name an offered tool and whose
    arguments satisfy its JSON schema (``jsonschema``)."""

    name = "tool_call_validity"
    direction = Direction.MAXIMIZE
    requires = ("tools",)
    description = "fraction of calls valid against the tool's JSON schema"

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        from ..agents.schemas import call_errors

        trace = self.trace(generation)
        trace.require_arguments()
        tools = sample_field(sample, "tools")
        errors: list[str] = []
        valid = total = 0
        for t, calls in enumerate(trace.turns):
            for i, c in enumerate(calls):
                total += 1
                if (t, i) in trace.malformed:
                    errors.append(f"{c.name}: arguments are not a JSON object: {trace.malformed[(t, i)][:80]!r}")
                    continue
                errs = call_errors(c, tools)
                if errs:
                    errors += errs
                else:
                    valid += 1
        return _maybe(self.name, valid / total if total else None, "the agent made no call",
                      valid=valid, calls=total, errors=errors[:20])


class PermissionViolations(_AgentMetric):
    """Calls to tools outside the allow-list (param ``allowed_tools``, else
    ``sample.metadata["allowed_tools"]``): ``any`` (1 when the episode has a
    violation) and ``rate`` (violating calls / calls)."""

    name = "permission_violations"
    direction = Direction.MINIMIZE
    outputs = ("any", "rate")
    description = "calls to tools outside the allow-list (any per episode, and rate per call)"

    def __init__(self, *, allowed_tools: list[str] | None = None, as_name: str | None = None) -> None:
        if allowed_tools is not None and not (
            isinstance(allowed_tools, list) and all(isinstance(t, str) for t in allowed_tools)
        ):
            raise TypeError("allowed_tools must be a list of tool names")
        super().__init__(allowed_tools=allowed_tools, as_name=as_name)

    def missing_requirements(self, sample: Sample, generation: Generation | None, context: dict | None) -> list[str]:
        missing = super().missing_requirements(sample, generation, context)
        if self.params["allowed_tools"] is None and (sample.metadata or {}).get("allowed_tools") is None:
            missing.append("metadata.allowed_tools (or the allowed_tools parameter)")
        return missing

    def score(self, sample: Sample, generation: Generation, context: dict) -> dict[str, Score]:
        allowed = self.params["allowed_tools"]
        if allowed is None:
            allowed = sample.metadata["allowed_tools"]
        allowed = set(allowed)
        trace = self.trace(generation)
        bad = [f"{c.name}@{t}" for t, calls in enumerate(trace.turns) for c in calls if c.name not in allowed]
        total = trace.n_calls
        meta = {"violations": bad, "calls": total}
        return {
            "any": Score.scored("any", 1.0 if bad else 0.0, metadata=meta),
            "rate": _maybe("rate", len(bad) / total if total else None, "the agent made no call", **meta),
        }


class Irrelevance(_AgentMetric):
    """On requests no tool fits (``sample.metadata["irrelevant"] == True``):
    1 when the agent declined (made no call), else 0. Other samples:
    not_tested."""

    name = "irrelevance"
    direction = Direction.MAXIMIZE
    description = "the agent made no call on a request no tool fits"

    def missing_requirements(self, sample: Sample, generation: Generation | None, context: dict | None) -> list[str]:
        missing = super().missing_requirements(sample, generation, context)
        if (sample.metadata or {}).get("irrelevant") is not True:
            missing.append("metadata.irrelevant (this sample is not an irrelevance case)")
        return missing

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        trace = self.trace(generation)
        return Score.scored(self.name, 0.0 if trace.n_calls else 1.0,
                            metadata={"calls": [c.name for t in trace.turns for c in t]})
