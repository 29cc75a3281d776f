"""Tool-call matching: maximum bipartite matching, order-free within a turn.

A predicted call and a reference call *may pair* when their names are equal
and their arguments agree under the chosen mode:

``exact``   arguments ``json_equal`` (1 == 1.0, True != 1, key order free, nested)
``subset``  every reference argument is present in the call with a
            ``json_equal`` value; extra arguments in the call are allowed
``name``    names only
``bfcl``    the BFCL AST checker's per-call rules (``agents.bfcl``)
custom      ``comparator="module:function"``: ``fn(expected_args, actual_args,
            tool_name) -> bool`` (a two-argument function gets the first two);
            names must still be equal

Among all pairings, the one with the most pairs is taken (maximum
cardinality, ``scipy.optimize.linear_sum_assignment``), not a greedy
first fit. Ties between maximum pairings are broken, in order, by the fewest
pairs in a worse *tier* (used by argument correctness: name-and-arguments
before name-only), then the least turn displacement (a call paired with a
reference call of the same turn index before one further away), then the
least displacement inside the turn; any tie left is resolved the same way on
every run (the solver is deterministic).

``turn_mode="flat"`` (default) pairs across the whole episode, so precision,
recall and F1 measure *which* calls were made and the turn structure is left
to the parallel-call and order diagnostics; ``"aligned"`` only pairs calls of
the same turn index (turn i of the agent against turn i of the reference).

Scores: precision = TP / predicted calls, recall = TP / reference calls,
F1 = 2 TP / (predicted + reference) (defined whenever either is non-empty),
exact set = every call paired and nothing extra. A ratio whose denominator
is 0 is not reported.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..core.types import ToolCall
from ..errors import ConfigError
from .canon import json_equal

ARGUMENT_MODES = ("exact", "subset", "name", "bfcl")


def load_callable(ref: str, what: str = "callable") -> Callable[..., Any]:
    """Import ``package.module:function`` (dotted attributes allowed)."""
    if not isinstance(ref, str) or ":" not in ref:
        raise ConfigError(f"{what} {ref!r}: use 'package.module:function'")
    module_name, _, attr = ref.partition(":")
    from ..core.imports import import_user_module

    obj: Any = import_user_module(module_name, f"{what} {ref!r}")
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ConfigError(f"{what} {ref!r}: {module_name!r} has no attribute {attr!r}")
    if not callable(obj):
        raise ConfigError(f"{what} {ref!r} is not callable")
    return obj


def _n_positional(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 3
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 3
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


class CallMatcher:
    """Whether a predicted call matches a reference call (see the module doc)."""

    def __init__(self, arguments: str = "exact", comparator: str | Callable[..., Any] | None = None,
                 tools: Sequence[dict[str, Any]] | None = None) -> None:
        if comparator is not None:
            self.mode = "custom"
            fn = load_callable(comparator, "argument comparator") if isinstance(comparator, str) else comparator
            self._custom = fn
            self._arity = _n_positional(fn)
        elif arguments in ARGUMENT_MODES:
            self.mode = arguments
        else:
            raise ConfigError(
                f"arguments must be one of {', '.join(ARGUMENT_MODES)} (or set comparator), got {arguments!r}"
            )
        self.tools = list(tools or [])
        self._bfcl_cache: dict[str, dict[str, Any] | None] = {}

    @property
    def uses_arguments(self) -> bool:
        return self.mode != "name"

    def args_match(self, ref: ToolCall, pred: ToolCall) -> bool:
        if self.mode == "name":
            return True
        if self.mode == "exact":
            return json_equal(ref.arguments, pred.arguments)
        if self.mode == "subset":
            return all(k in pred.arguments and json_equal(v, pred.arguments[k]) for k, v in ref.arguments.items())
        if self.mode == "bfcl":
            from .bfcl import check_call

            return check_call(ref, pred, self._bfcl_schema(ref.name)).valid
        args = (ref.arguments, pred.arguments, ref.name)[: max(2, min(3, self._arity))]
        return bool(self._custom(*args))

    def __call__(self, ref: ToolCall, pred: ToolCall) -> bool:
        return ref.name == pred.name and self.args_match(ref, pred)

    def _bfcl_schema(self, name: str) -> dict[str, Any]:
        from ..core.metric import MissingEvidence
        from .schemas import find_tool

        if name not in self._bfcl_cache:
            self._bfcl_cache[name] = find_tool(self.tools, name)
        schema = self._bfcl_cache[name]
        if schema is None:
            raise MissingEvidence(f"bfcl mode needs the schema of tool {name!r}, which the sample does not list")
        return schema


@dataclass(frozen=True)
class Node:
    """A call and where it sits: turn index and position inside the turn."""

    turn: int
    index: int
    call: ToolCall


def flatten(turns: Sequence[Sequence[ToolCall]]) -> list[Node]:
    return [Node(t, i, c) for t, calls in enumerate(turns) for i, c in enumerate(calls)]


def max_assignment(
    n_ref: int, n_pred: int, edge: Callable[[int, int], tuple[int, float] | None]
) -> list[tuple[int, int]]:
    """A maximum-cardinality matching. ``edge(i, j)`` is ``None`` (no edge) or
    ``(tier, displacement)`` with ``displacement`` in [0, 1). Among maximum
    matchings, the smallest total tier, then the smallest total displacement."""
    if n_ref == 0 or n_pred == 0:
        return []
    from ..errors import require

    linear_sum_assignment = require("scipy.optimize", "stats").linear_sum_assignment
    import numpy as np

    k = min(n_ref, n_pred)
    edges: dict[tuple[int, int], tuple[int, float]] = {}
    max_tier = 0
    for i in range(n_ref):
        for j in range(n_pred):
            e = edge(i, j)
            if e is not None:
                edges[(i, j)] = e
                max_tier = max(max_tier, e[0])
    if not edges:
        return []
    w_tier = float(k + 1)  # one tier step outweighs all displacements together
    big = (max_tier * w_tier + 1.0) * (k + 1)  # one more pair outweighs all tiers together
    cost = np.full((n_ref, n_pred), big)
    for (i, j), (tier, disp) in edges.items():
        cost[i, j] = tier * w_tier + disp
    rows, cols = linear_sum_assignment(cost)
    return sorted((int(i), int(j)) for i, j in zip(rows, cols) if (int(i), int(j)) in edges)


def _displacement(r: Node, p: Node, n_turns: int, n_index: int) -> float:
    return (abs(r.turn - p.turn) + abs(r.index - p.index) / (n_index + 1.0)) / (n_turns + 1.0)


@dataclass
class MatchResult:
    ref: list[Node]
    pred: list[Node]
    pairs: list[tuple[int, int]]  # (index into ref, index into pred)
    route: int = 0
    n_routes: int = 1
    tiers: dict[tuple[int, int], int] = field(default_factory=dict)

    @property
    def tp(self) -> int:
        return len(self.pairs)

    @property
    def precision(self) -> float | None:
        return self.tp / len(self.pred) if self.pred else None

    @property
    def recall(self) -> float | None:
        return self.tp / len(self.ref) if self.ref else None

    @property
    def f1(self) -> float | None:
        total = len(self.pred) + len(self.ref)
        return 2.0 * self.tp / total if total else None

    @property
    def exact_set(self) -> bool:
        return self.tp == len(self.ref) == len(self.pred)

    def selection_key(self) -> tuple[float, int, int]:
        """Route order: highest F1 (an empty route met by no call counts as
        1), then fewest reference calls, then first listed."""
        f1 = self.f1 if self.f1 is not None else (1.0 if self.exact_set else 0.0)
        return (-f1, len(self.ref), self.route)

    def evidence(self) -> dict[str, Any]:
        return {
            "route": self.route,
            "routes": self.n_routes,
            "tp": self.tp,
            "predicted": len(self.pred),
            "reference": len(self.ref),
            "pairs": [
                [self.ref[i].turn, self.ref[i].index, self.pred[j].turn, self.pred[j].index] for i, j in self.pairs
            ],
            "unmatched_reference": [
                f"{n.call.name}@{n.turn}" for k, n in enumerate(self.ref) if k not in {i for i, _ in self.pairs}
            ],
            "unmatched_predicted": [
                f"{n.call.name}@{n.turn}" for k, n in enumerate(self.pred) if k not in {j for _, j in self.pairs}
            ],
        }


def match_calls(ref_turns: Sequence[Sequence[ToolCall]], pred_turns: Sequence[Sequence[ToolCall]],
                matcher: CallMatcher, *, turn_mode: str = "flat", name_tier: bool = False) -> MatchResult:
    """Pair predicted calls with reference calls (maximum matching).

    ``name_tier``: also let same-name calls whose arguments disagree pair (tier
    1, after full matches); ``MatchResult.tiers`` says which pairs are full."""
    if turn_mode not in ("flat", "aligned"):
        raise ConfigError(f"turn_mode must be 'flat' or 'aligned', got {turn_mode!r}")
    ref, pred = flatten(ref_turns), flatten(pred_turns)
    n_turns = max(len(ref_turns), len(pred_turns))
    n_index = max([len(t) for t in list(ref_turns) + list(pred_turns)] or [0])
    tiers: dict[tuple[int, int], int] = {}

    def edge(i: int, j: int) -> tuple[int, float] | None:
        r, p = ref[i], pred[j]
        if r.call.name != p.call.name or (turn_mode == "aligned" and r.turn != p.turn):
            return None
        if matcher.args_match(r.call, p.call):
            tier = 0
        elif name_tier:
            tier = 1
        else:
            return None
        tiers[(i, j)] = tier
        return tier, _displacement(r, p, n_turns, n_index)

    pairs = max_assignment(len(ref), len(pred), edge)
    return MatchResult(ref, pred, pairs, tiers={pq: tiers[pq] for pq in pairs})


def best_route(routes: Sequence[Sequence[Sequence[ToolCall]]], pred_turns: Sequence[Sequence[ToolCall]],
               matcher: CallMatcher, *, turn_mode: str = "flat") -> MatchResult:
    """Match against every route and keep the best (``selection_key``)."""
    if not routes:
        raise ValueError("no reference route")
    results = []
    for k, route in enumerate(routes):
        res = match_calls(route, pred_turns, matcher, turn_mode=turn_mode)
        res.route, res.n_routes = k, len(routes)
        results.append(res)
    return min(results, key=MatchResult.selection_key)


def greedy_first_fit(ref_turns: Sequence[Sequence[ToolCall]], pred_turns: Sequence[Sequence[ToolCall]],
                     matcher: CallMatcher) -> int:
    """Pairs found by greedy first fit in reference order: shown for contrast
    in docs and tests only, never used for scoring."""
    used: set[int] = set()
    pred = flatten(pred_turns)
    tp = 0
    for r in flatten(ref_turns):
        for j, p in enumerate(pred):
            if j not in used and matcher(r.call, p.call):
                used.add(j)
                tp += 1
                break
    return tp
