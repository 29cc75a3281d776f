"""Turn structure and trajectory diagnostics over a matching.

Parallel calls (reference calls of one turn are independent; a later turn
may depend on an earlier one). Only pairs of *matched* calls enter, so a
missed call counts against recall, not against parallelism:

``parallel recall``     of the pairs of matched reference calls that share a
                        reference turn (independent), the fraction the agent
                        issued in one turn (split pairs lower it)
``parallel detection``  of the reference turns with at least two matched
                        calls, the fraction whose calls the agent issued all in
                        one turn
``parallel precision``  of the pairs of matched calls the agent issued in one
                        turn, the fraction whose reference calls share a turn
                        (a dependent pair batched too early lowers it)

Order: ``pairwise`` is the fraction of matched reference pairs in different
turns that the agent kept in order (the later one in a strictly later turn);
``subsequence`` is 1 when the whole reference chain can be found, in turn
order, inside the agent's turns (extra calls allowed, independent calls may
be split); ``strict`` is 1 when the agent's turns equal the reference turns one
for one (same number of turns, each an exact set).

Every ratio is ``None`` when its denominator is 0 (reported as not_tested).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Sequence

from ..core.types import ToolCall
from .canon import canonical
from .matching import CallMatcher, MatchResult, match_calls, max_assignment


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def parallel_stats(m: MatchResult) -> dict[str, Any]:
    pred_of = {i: j for i, j in m.pairs}
    matched = sorted(pred_of)
    split = kept = 0
    for a, b in combinations(matched, 2):
        if m.ref[a].turn == m.ref[b].turn:
            if m.pred[pred_of[a]].turn == m.pred[pred_of[b]].turn:
                kept += 1
            else:
                split += 1
    ref_of = {j: i for i, j in m.pairs}
    batched_ok = batched_dep = 0
    for x, y in combinations(sorted(ref_of), 2):
        if m.pred[x].turn == m.pred[y].turn:
            if m.ref[ref_of[x]].turn == m.ref[ref_of[y]].turn:
                batched_ok += 1
            else:
                batched_dep += 1
    groups: dict[int, list[int]] = {}
    for i in matched:
        groups.setdefault(m.ref[i].turn, []).append(i)
    parallel_groups = [g for g in groups.values() if len(g) >= 2]
    detected = sum(len({m.pred[pred_of[i]].turn for i in g}) == 1 for g in parallel_groups)
    return {
        "recall": _ratio(kept, kept + split),
        "precision": _ratio(batched_ok, batched_ok + batched_dep),
        "detection": _ratio(detected, len(parallel_groups)),
        "independent_pairs": kept + split,
        "split_independent_pairs": split,
        "batched_pairs": batched_ok + batched_dep,
        "batched_dependent_pairs": batched_dep,
        "parallel_reference_turns": len(parallel_groups),
        "parallel_turns_detected": detected,
    }


def pairwise_order(m: MatchResult) -> tuple[float | None, int, int]:
    pred_of = dict(m.pairs)
    kept = total = 0
    for a, b in combinations(sorted(pred_of), 2):
        ra, rb = m.ref[a].turn, m.ref[b].turn
        if ra == rb:
            continue
        total += 1
        first, second = (a, b) if ra < rb else (b, a)
        if m.pred[pred_of[first]].turn < m.pred[pred_of[second]].turn:
            kept += 1
    return _ratio(kept, total), kept, total


def in_order_subsequence(ref_turns: Sequence[Sequence[ToolCall]], pred_turns: Sequence[Sequence[ToolCall]],
                         matcher: CallMatcher) -> bool:
    """Whether every reference turn can be matched, in order, each one
    entirely after the previous (greedy on the earliest finishing turn, which
    is optimal: turns before it cannot serve a later reference turn anyway)."""
    frontier = -1
    for rt in ref_turns:
        if not rt:
            continue
        placed = False
        for last in range(frontier + 1, len(pred_turns)):
            cands = [c for t in range(frontier + 1, last + 1) for c in pred_turns[t]]
            if len(cands) < len(rt):
                continue
            pairs = max_assignment(len(rt), len(cands),
                                   lambda i, j: (0, 0.0) if matcher(rt[i], cands[j]) else None)
            if len(pairs) == len(rt):
                frontier, placed = last, True
                break
        if not placed:
            return False
    return True


def strict_order(ref_turns: Sequence[Sequence[ToolCall]], pred_turns: Sequence[Sequence[ToolCall]],
                 matcher: CallMatcher) -> bool:
    ref = [t for t in ref_turns if t]
    pred = [t for t in pred_turns if t]
    if len(ref) != len(pred):
        return False
    return all(match_calls([r], [p], matcher).exact_set for r, p in zip(ref, pred))


def call_key(call: ToolCall) -> Any:
    return (call.name, canonical(call.arguments))


def redundancy(
    turns: Sequence[Sequence[ToolCall]], malformed: dict[tuple[int, int], str] | None = None
) -> tuple[float | None, int, int]:
    """(ratio, redundant, total): calls that repeat an earlier identical call
    (same name, ``json_equal`` arguments)."""
    seen: set[Any] = set()
    redundant = total = 0
    for t, calls in enumerate(turns):
        for i, c in enumerate(calls):
            key = (
                ("malformed", c.name, (malformed or {}).get((t, i)))
                if malformed and (t, i) in malformed
                else call_key(c)
            )
            total += 1
            if key in seen:
                redundant += 1
            seen.add(key)
    return _ratio(redundant, total), redundant, total


def loops(turns: Sequence[Sequence[ToolCall]], window: int = 1) -> tuple[float | None, int, int]:
    """(frequency, looping turns, transitions): a turn whose calls (as a
    multiset) equal those of one of the ``window`` turns before it."""
    keys = [tuple(sorted((call_key(c) for c in t), key=repr)) for t in turns if t]
    looping = sum(any(keys[k] == keys[j] for j in range(max(0, k - window), k)) for k in range(1, len(keys)))
    transitions = max(len(keys) - 1, 0)  # no turn with calls: no transition (not -1)
    return _ratio(looping, transitions), looping, transitions
