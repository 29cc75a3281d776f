"""Parsers of judge replies. Each raises ``JudgeReplyError`` (the score is
then ``unknown``) rather than guessing a value."""

from __future__ import annotations

import math
import re
from typing import Any

from .base import JudgeReplyError

_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")


def _short(text: str, n: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def parse_yes_no(reply: str) -> bool:
    """The first standalone ``yes`` or ``no`` in the reply."""
    m = _YES_NO.search(reply or "")
    if m is None:
        raise JudgeReplyError(f"no yes/no verdict in the judge's reply: {_short(reply)!r}")
    return m.group(1).lower() == "yes"


def parse_score(reply: str, lo: int, hi: int) -> float:
    """The first number in the reply; it must lie in [lo, hi]."""
    m = _NUMBER.search(reply or "")
    if m is None:
        raise JudgeReplyError(f"no score in the judge's reply: {_short(reply)!r}")
    value = float(m.group(0))
    if not lo <= value <= hi:
        raise JudgeReplyError(f"score {m.group(0)} is outside {lo}-{hi} in the judge's reply: {_short(reply)!r}")
    return value


def _as_score(token: Any, lo: int, hi: int) -> int | None:
    t = str(token).strip()
    if not t.isdigit():
        return None
    v = int(t)
    return v if lo <= v <= hi else None


def weighted_score(steps: list[dict[str, Any]], lo: int, hi: int) -> tuple[float, dict[int, float]]:
    """G-Eval's probability-weighted score: at the first output token that is
    a score in [lo, hi], the expectation of the score under the (renormalised)
    probabilities of the score tokens among the top alternatives.

    ``steps``: per output token ``{"token", "logprob", "top": {token: logprob}}``."""
    for step in steps:
        if _as_score(step.get("token"), lo, hi) is None:
            continue
        probs: dict[int, float] = {}
        top = dict(step.get("top") or {})
        if not top and step.get("logprob") is not None:
            top = {step["token"]: step["logprob"]}
        for tok, lp in top.items():
            v = _as_score(tok, lo, hi)
            if v is not None and lp is not None and math.isfinite(float(lp)):
                probs[v] = probs.get(v, 0.0) + math.exp(float(lp))
        total = sum(probs.values())
        if total <= 0:
            break
        probs = {k: p / total for k, p in sorted(probs.items())}
        return sum(k * p for k, p in probs.items()), probs
    raw = "".join(str(s.get("token", "")) for s in steps)
    raise JudgeReplyError(f"no score token in {lo}-{hi} among the judge's output tokens: {_short(raw)!r}")


def split_claims(text: str, max_claims: int = 20) -> tuple[list[str], bool]:
    """Sentences of an answer (the claims to ground), and whether some were cut."""
    parts = re.split(r"(?<=[.!?])\s+|\n+", (text or "").strip())
    claims = [p.strip() for p in parts if p and re.search(r"\w", p)]
    return claims[:max_claims], len(claims) > max_claims
