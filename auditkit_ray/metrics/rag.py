"""Deterministic, model-free RAG checks: evidence recall, freshness, access
control, citations, numbers and abstention.

Data shapes (docs/metrics-notes.md has the full description):

- ``sample.retrieved_contexts``: ``[{"id", "digest"?, "version"?, "rank"?,
  "score"?, "text"?}, ...]`` in the order shown to the model;
- ``sample.gold_evidence``: the ids that support the answer;
- ``sample.corpus_snapshot``: ``{"documents": {id: {"digest", "version",
  "superseded_at", "access_groups"}}, "decision_date"}``;
- ``sample.metadata``: ``user_groups`` (list), ``gold_numbers`` (list),
  ``answerable`` (bool), and optionally ``decision_date``.

A missing input gives ``not_tested`` (the check does not apply) or
``unknown`` (it applies but the evidence to decide is absent), never 0.
An empty ``retrieved_contexts`` list is not missing: the retriever found
nothing, and each check scores that (docs/metrics-notes.md, "Empty lists").
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timezone
from typing import Any

from ..core.metric import Direction, Metric, MissingEvidence
from ..core.types import Generation, Sample, Score
from .generation import numbers_close, parse_number, parse_numbers
from .retrieval import context_id

PUBLIC_GROUP = "*"


# -- helpers -------------------------------------------------------------------------


def _retrieved_ids(sample: Sample) -> list[str]:
    """Distinct retrieved ids, in the order given."""
    ctxs = sample.retrieved_contexts or []
    if not isinstance(ctxs, (list, tuple)):
        raise ValueError(f"retrieved_contexts must be a list, got {type(ctxs).__name__}")
    out: list[str] = []
    for i, c in enumerate(ctxs):
        cid = context_id(c, i)
        if cid not in out:
            out.append(cid)
    return out


def _gold(sample: Sample) -> list[str]:
    gold = sample.gold_evidence
    if not gold:
        raise MissingEvidence("no gold evidence for this sample")
    if not isinstance(gold, (list, tuple)):
        raise ValueError(f"gold_evidence must be a list of ids, got {type(gold).__name__}")
    return list(dict.fromkeys(str(g) for g in gold))


def _documents(sample: Sample) -> dict[str, dict]:
    snap = sample.corpus_snapshot
    if not isinstance(snap, dict):
        raise ValueError(f"corpus_snapshot must be an object, got {type(snap).__name__}")
    docs = snap.get("documents")
    if not isinstance(docs, dict):
        raise ValueError(
            "corpus_snapshot.documents must be an object {id: {digest, version, superseded_at, access_groups}}"
        )
    for k, v in docs.items():
        if not isinstance(v, dict):
            raise ValueError(f"corpus_snapshot.documents[{k!r}] must be an object, got {type(v).__name__}")
    return {str(k): v for k, v in docs.items()}


def parse_when(value: Any, field: str) -> datetime:
    """An ISO 8601 date or datetime (string, date or datetime); naive times are UTC."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{field}: {value!r} is not an ISO 8601 date or datetime") from None
    else:
        raise ValueError(f"{field}: {value!r} is not an ISO 8601 date or datetime")
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def _scored(name: str, value: float, reason: str | None = None, **metadata: Any) -> Score:
    return Score.scored(name, value, reason=reason, metadata=metadata)


class _RagMetric(Metric, abstract=True):
    family = "rag"
    #: an empty retrieval is a result to score; a missing or null one is not_tested
    empty_is_evidence = ("retrieved_contexts",)


class _PlainRagMetric(_RagMetric, abstract=True):
    """A check with no parameters (it reads no output text)."""

    def __init__(self) -> None:
        super().__init__()


# -- evidence recall -----------------------------------------------------------------


class EvidenceRecall(_PlainRagMetric):
    """Fraction of the gold evidence set that was retrieved (any rank)."""

    name = "evidence_recall"
    direction = Direction.MAXIMIZE
    requires = ("retrieved_contexts",)
    version = "2"  # 2: an empty retrieval scores (was not_tested)
    description = "fraction of the gold evidence ids found among the retrieved contexts (set recall, no cut-off)"

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        gold = _gold(sample)
        got = set(_retrieved_ids(sample))
        missing = [g for g in gold if g not in got]
        return _scored(self.name, (len(gold) - len(missing)) / len(gold),
                       complete=not missing, missing=missing)


# -- freshness -----------------------------------------------------------------------


def stale_documents(sample: Sample) -> tuple[list[str], dict[str, str]]:
    """(retrieved ids, {stale id: why}). A retrieved document is stale when it
    is not in the snapshot, its digest or version differs from the snapshot's,
    or the snapshot says it was superseded at or before the decision date."""
    ids = _retrieved_ids(sample)
    docs = _documents(sample)
    snap = sample.corpus_snapshot or {}
    when_raw = snap.get("decision_date")
    if when_raw is None:
        when_raw = (sample.metadata or {}).get("decision_date")
    when = parse_when(when_raw, "decision_date") if when_raw is not None else None
    given = {}
    for i, c in enumerate(sample.retrieved_contexts or []):
        given.setdefault(context_id(c, i), c)
    stale: dict[str, str] = {}
    for d in ids:
        doc = docs.get(d)
        ctx = given[d]
        if doc is None:
            stale[d] = "not in the corpus snapshot"
            continue
        for key in ("digest", "version"):
            if ctx.get(key) is not None and doc.get(key) is not None and str(ctx[key]) != str(doc[key]):
                stale[d] = f"{key} {ctx[key]!r} does not match the snapshot's {doc[key]!r}"
                break
        if d in stale or doc.get("superseded_at") is None:
            continue
        if when is None:
            raise MissingEvidence(f"document {d!r} has superseded_at but there is no decision_date "
                                  "(corpus_snapshot.decision_date or metadata.decision_date)")
        sup = parse_when(doc["superseded_at"], f"corpus_snapshot.documents[{d!r}].superseded_at")
        if sup <= when:
            stale[d] = f"superseded at {doc['superseded_at']} (decision date {when_raw})"
    return ids, stale


class Freshness(_PlainRagMetric):
    """1 when no retrieved document is stale (superseded by the decision date, or digest/version mismatch)."""

    name = "freshness"
    direction = Direction.MAXIMIZE
    requires = ("retrieved_contexts", "corpus_snapshot")
    version = "2"  # 2: an empty retrieval scores (was not_tested)
    description = (
        "1 when no retrieved document is stale (superseded by the decision date, or not the snapshot's digest)"
    )

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        ids, stale = stale_documents(sample)
        why = "; ".join(f"{d}: {w}" for d, w in stale.items()) or (None if ids else "nothing was retrieved")
        return _scored(self.name, 0.0 if stale else 1.0, why, stale=stale, retrieved=len(ids))


class StaleHitRate(_PlainRagMetric):
    """Fraction of retrieved documents that are stale (lower is better)."""

    name = "stale_hit_rate"
    direction = Direction.MINIMIZE
    requires = ("retrieved_contexts", "corpus_snapshot")
    version = "2"  # 2: an empty retrieval scores (was not_tested)
    description = "fraction of retrieved documents that are stale (superseded by the decision date, or digest mismatch)"

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        ids, stale = stale_documents(sample)
        if not ids:
            return Score.not_tested(self.name, "nothing was retrieved (a rate over no documents)",
                                    metadata={"retrieved": 0})
        return _scored(self.name, len(stale) / len(ids), stale=stale, retrieved=len(ids))


# -- access control --------------------------------------------------------------------


def access_violations(sample: Sample) -> tuple[list[str], dict[str, str]] | None:
    """(retrieved ids, {violating id: why}), or None when the user's groups are
    not given. A retrieved document violates access control when it is not in
    the snapshot, or its ``access_groups`` share no group with the user's
    (``"*"`` marks a document open to everyone; no groups means no access)."""
    meta = sample.metadata or {}
    if "user_groups" not in meta or meta["user_groups"] is None:
        return None
    groups = meta["user_groups"]
    if isinstance(groups, str) or not isinstance(groups, (list, tuple)):
        raise ValueError(f"metadata.user_groups must be a list of group names, got {type(groups).__name__}")
    user = {str(g) for g in groups}
    ids = _retrieved_ids(sample)
    docs = _documents(sample)
    bad: dict[str, str] = {}
    for d in ids:
        doc = docs.get(d)
        if doc is None:
            bad[d] = "not in the corpus snapshot"
            continue
        allowed = doc.get("access_groups")
        if allowed is None:
            allowed = []
        if isinstance(allowed, str) or not isinstance(allowed, (list, tuple)):
            raise ValueError(
                f"corpus_snapshot.documents[{d!r}].access_groups must be a list, got {type(allowed).__name__}"
            )
        allowed_set = {str(g) for g in allowed}
        if PUBLIC_GROUP not in allowed_set and not (allowed_set & user):
            bad[d] = f"access groups {sorted(allowed_set)} do not include any of the user's {sorted(user)}"
    return ids, bad


class AccessControlCompliance(_PlainRagMetric):
    """1 when every retrieved document is one the user may read."""

    name = "access_control_compliance"
    direction = Direction.MAXIMIZE
    requires = ("retrieved_contexts", "corpus_snapshot")
    version = "2"  # 2: an empty retrieval scores (was not_tested)
    description = "1 when every retrieved document's access groups intersect the user's groups (metadata.user_groups)"

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        res = access_violations(sample)
        if res is None:
            return Score.not_tested(self.name, "missing metadata.user_groups")
        ids, bad = res
        why = "; ".join(f"{d}: {w}" for d, w in bad.items()) or (None if ids else "nothing was retrieved")
        return _scored(self.name, 0.0 if bad else 1.0, why, violations=bad, retrieved=len(ids))


class UnauthorizedHitRate(_PlainRagMetric):
    """Fraction of retrieved documents the user may not read (lower is better)."""

    name = "unauthorized_hit_rate"
    direction = Direction.MINIMIZE
    requires = ("retrieved_contexts", "corpus_snapshot")
    version = "2"  # 2: an empty retrieval scores (was not_tested)
    description = "fraction of retrieved documents outside the user's access groups or missing from the snapshot"

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        res = access_violations(sample)
        if res is None:
            return Score.not_tested(self.name, "missing metadata.user_groups")
        ids, bad = res
        if not ids:
            return Score.not_tested(self.name, "nothing was retrieved (a rate over no documents)",
                                    metadata={"retrieved": 0})
        return _scored(self.name, len(bad) / len(ids), violations=bad, retrieved=len(ids))


# -- citations -------------------------------------------------------------------------

#: ``[1]``, ``[2, 3]``, ``[doc-7]``, ``[^4]``; not Markdown links ``[text](url)``
CITATION_PATTERN = r"\[\^?([^\[\]\n]{1,200})\](?!\()"
_SPLIT = re.compile(r"\s*[,;]\s*")
_RANGE = re.compile(r"(\d+)\s*[-\u2013]\s*(\d+)")  # [2-4] cites 2, 3 and 4


class _CitationMetric(_RagMetric, abstract=True):
    requires = ("retrieved_contexts",)
    version = "2"  # 2: an empty retrieval scores (was not_tested)

    def __init__(self, *, pattern: str | None = None, numeric: str = "position", on: str | None = None) -> None:
        if numeric not in ("position", "id"):
            raise TypeError(f"numeric must be 'position' or 'id', not {numeric!r}")
        super().__init__(pattern=pattern, numeric=numeric, on=on)
        try:
            self._rx = re.compile(pattern or CITATION_PATTERN)
        except re.error as exc:
            raise TypeError(f"pattern: invalid regular expression ({exc})") from None
        if self._rx.groups < 1:
            raise TypeError("pattern must have a capturing group around the cited key(s)")

    def citations(self, sample: Sample, generation: Generation, context: dict) -> tuple[list[dict], list[str]]:
        """[{key, doc (resolved id or None), valid, why}] for each distinct
        cited key, and the retrieved ids."""
        text = self.prediction(generation, context)
        retrieved = [context_id(c, i) for i, c in enumerate(sample.retrieved_contexts or [])]
        known = None
        if isinstance(sample.corpus_snapshot, dict) and isinstance(sample.corpus_snapshot.get("documents"), dict):
            known = {str(k) for k in sample.corpus_snapshot["documents"]}
        keys: list[str] = []
        for m in self._rx.finditer(text):
            for key in _SPLIT.split(m.group(1).strip()):
                span = _RANGE.fullmatch(key) if self.params["numeric"] == "position" else None
                lo, hi = (int(span[1]), int(span[2])) if span else (0, -1)
                expanded = [str(n) for n in range(lo, hi + 1)] if 0 <= hi - lo < 100 else [key]
                for k in expanded:
                    if k and k not in keys:
                        keys.append(k)
        out = []
        for key in keys:
            if self.params["numeric"] == "position" and key.isdigit():
                n = int(key)
                if 1 <= n <= len(retrieved):
                    out.append({"key": key, "doc": retrieved[n - 1], "valid": True, "why": None})
                else:
                    out.append({"key": key, "doc": None, "valid": False,
                                "why": f"[{key}] is out of range (1..{len(retrieved)} retrieved)"})
            elif key in retrieved:
                out.append({"key": key, "doc": key, "valid": True, "why": None})
            elif known is not None and key not in known:
                out.append({"key": key, "doc": None, "valid": False, "why": f"[{key}] is not a document in the corpus"})
            else:
                out.append({"key": key, "doc": None, "valid": False, "why": f"[{key}] was not retrieved"})
        return out, retrieved


class CitationValidity(_CitationMetric):
    """Fraction of the output's distinct citations that point at a retrieved document."""

    name = "citation_validity"
    direction = Direction.MAXIMIZE
    description = "fraction of distinct citations ([n] in range, or [doc-id]) that point at a retrieved document"

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        cites, _ = self.citations(sample, generation, context)
        if not cites:
            raise MissingEvidence("the output cites nothing")
        bad = [c["why"] for c in cites if not c["valid"]]
        return _scored(self.name, (len(cites) - len(bad)) / len(cites), "; ".join(bad) or None,
                       cited=[c["key"] for c in cites], invalid=bad)


class CitationPrecision(_CitationMetric):
    """Fraction of distinct citations that point at a gold evidence document."""

    name = "citation_precision"
    direction = Direction.MAXIMIZE
    description = (
        "fraction of distinct citations that resolve to a gold evidence document (invalid ones count as wrong)"
    )

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        gold = set(_gold(sample))
        cites, _ = self.citations(sample, generation, context)
        if not cites:
            raise MissingEvidence("the output cites nothing")
        # two keys resolving to the same document count once
        resolved: dict[str, bool] = {}
        for c in cites:
            resolved.setdefault(c["doc"] or f"\0{c['key']}", c["doc"] in gold)
        return _scored(self.name, sum(resolved.values()) / len(resolved), cited=[c["key"] for c in cites])


class CitationRecall(_CitationMetric):
    """Fraction of gold evidence documents the output cites."""

    name = "citation_recall"
    direction = Direction.MAXIMIZE
    description = "fraction of gold evidence documents cited by the output (param only_retrieved_gold)"

    def __init__(self, *, only_retrieved_gold: bool = False, pattern: str | None = None, numeric: str = "position",
                 on: str | None = None) -> None:
        super().__init__(pattern=pattern, numeric=numeric, on=on)
        self.params["only_retrieved_gold"] = only_retrieved_gold

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        gold = _gold(sample)
        cites, retrieved = self.citations(sample, generation, context)
        if self.params["only_retrieved_gold"]:
            gold = [g for g in gold if g in retrieved]
            if not gold:
                raise MissingEvidence("no gold evidence document was retrieved")
        cited = {c["doc"] for c in cites if c["valid"]}
        missing = [g for g in gold if g not in cited]
        return _scored(self.name, (len(gold) - len(missing)) / len(gold), missing=missing)


# -- numbers ---------------------------------------------------------------------------

_BRACKETS = re.compile(r"\[[^\[\]\n]{0,200}\]")


class NumericCorrectness(_RagMetric):
    """Fraction of the gold numbers (metadata.gold_numbers) stated in the output."""

    name = "numeric_correctness"
    direction = Direction.MAXIMIZE
    requires = ("metadata.gold_numbers",)
    description = (
        "fraction of metadata.gold_numbers stated in the output within tolerance (commas, percentages handled)"
    )

    def __init__(self, *, abs_tol: float = 0.0, rel_tol: float = 1e-9, strip_citations: bool = True,
                 on: str | None = None) -> None:
        for key, tol in (("abs_tol", abs_tol), ("rel_tol", rel_tol)):
            if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not math.isfinite(tol) or tol < 0:
                raise TypeError(f"{key} must be a finite number >= 0, not {tol!r}")
        super().__init__(abs_tol=float(abs_tol), rel_tol=float(rel_tol), strip_citations=strip_citations, on=on)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        raw = sample.metadata["gold_numbers"]
        items = list(raw.values()) if isinstance(raw, dict) else raw if isinstance(raw, (list, tuple)) else [raw]
        golds = []
        for i, g in enumerate(items):
            try:
                golds.append(parse_number(g))
            except ValueError as exc:
                raise ValueError(f"metadata.gold_numbers[{i}]: {exc}") from None
        text = self.prediction(generation, context)
        if self.params["strip_citations"]:
            text = _BRACKETS.sub(" ", text)
        found = parse_numbers(text)
        a, r = self.params["abs_tol"], self.params["rel_tol"]
        missing = [g.text for g in golds if not any(numbers_close(p, g, a, r) for p in found)]
        extra = [p.text for p in found if not any(numbers_close(p, g, a, r) for g in golds)]
        return _scored(self.name, (len(golds) - len(missing)) / len(golds),
                       "missing " + ", ".join(missing) if missing else None, missing=missing, unsupported=extra)


# -- abstention ------------------------------------------------------------------------

_APOS = "['\u2019]"
#: The default refusal detector (case-insensitive ``re.search``). It looks for
#: explicit declines and for statements that the evidence lacks the answer.
DEFAULT_REFUSAL_PATTERN = (
    r"\b(?:"
    rf"i\s+(?:do\s+not|don{_APOS}?t)\s+know"
    rf"|i\s*(?:am|{_APOS}m)\s+(?:not\s+sure|unable\s+to)"
    rf"|(?:cannot|can{_APOS}?t|can\s+not|could\s+not|couldn{_APOS}?t|unable\s+to|not\s+able\s+to)\s+"
    r"(?:answer|determine|find|tell|say|provide|confirm|verify|be\s+determined|be\s+answered)"
    r"|(?:not|no)\s+enough\s+(?:information|context|evidence|data)"
    r"|insufficient\s+(?:information|context|evidence|data)"
    r"|(?:context|documents?|sources?|passages?|excerpts?|provided\s+(?:text|information|material))\s+"
    rf"(?:does\s+not|do\s+not|doesn{_APOS}?t|don{_APOS}?t|did\s+not|didn{_APOS}?t)\s+"
    r"(?:contain|mention|provide|include|specify|say|state|cover|address|answer)"
    r"|no\s+(?:relevant\s+)?(?:information|mention|evidence|data)\s+(?:about|on|regarding|in|is|was|available)"
    r"|not\s+(?:mentioned|specified|stated|provided|available|found|covered)\s+in\s+the"
    r"|unanswerable"
    r"|(?:i\s+)?(?:must|have\s+to|will)\s+decline"
    r")"
)


def answerable(sample: Sample) -> bool:
    """metadata.answerable when given; otherwise whether every gold evidence
    document was retrieved. Raises MissingEvidence when neither is known."""
    meta = sample.metadata or {}
    if meta.get("answerable") is not None:
        v = meta["answerable"]
        if not isinstance(v, bool):
            raise ValueError(f"metadata.answerable must be true or false, got {v!r}")
        return v
    if sample.gold_evidence and sample.retrieved_contexts is not None:
        got = set(_retrieved_ids(sample))
        return all(str(g) in got for g in sample.gold_evidence)
    raise MissingEvidence("cannot tell whether the evidence suffices: give metadata.answerable, "
                          "or gold_evidence and retrieved_contexts")


class Abstention(_RagMetric):
    """1 when the system declines exactly when the evidence is insufficient."""

    name = "abstention"
    direction = Direction.MAXIMIZE
    description = "1 when the output declines iff the evidence is insufficient (metadata.answerable; refusal regex)"

    def __init__(self, *, refusal_pattern: str | None = None, on: str | None = None) -> None:
        super().__init__(refusal_pattern=refusal_pattern, on=on)
        try:
            self._rx = re.compile(refusal_pattern or DEFAULT_REFUSAL_PATTERN, re.IGNORECASE)
        except re.error as exc:
            raise TypeError(f"refusal_pattern: invalid regular expression ({exc})") from None

    def refused(self, text: str) -> bool:
        return self._rx.search(text) is not None

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        can = answerable(sample)
        refused = self.refused(self.prediction(generation, context))
        outcome = {(True, False): "answered", (True, True): "false_refusal",
                   (False, True): "correct_refusal", (False, False): "missed_refusal"}[(can, refused)]
        return _scored(self.name, 1.0 if refused != can else 0.0, None if refused != can else outcome,
                       answerable=can, refused=refused, outcome=outcome)


__all__ = ["AccessControlCompliance", "Abstention", "CITATION_PATTERN", "CitationPrecision", "CitationRecall",
           "CitationValidity", "DEFAULT_REFUSAL_PATTERN", "EvidenceRecall", "Freshness", "NumericCorrectness",
           "StaleHitRate", "UnauthorizedHitRate", "access_violations", "answerable", "parse_when", "stale_documents"]
