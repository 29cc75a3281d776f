"""Help with typos: the nearest registered names to a misspelled one."""

from __future__ import annotations

import difflib
from typing import Iterable


def nearest(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``choices`` closest to ``word`` (difflib's ratio, at least 0.6), best first."""
    pool = sorted(set(choices))
    hits = difflib.get_close_matches(word, pool, n=n, cutoff=0.6)
    if not hits:  # a name with a different prefix or suffix ("accuracy" for "exact_match_accuracy")
        hits = [c for c in pool if word and (word in c or c in word)][:n]
    return hits


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'a' or 'b'?)``, or ``""`` when nothing is close."""
    hits = nearest(word, choices)
    if not hits:
        return ""
    return " (did you mean " + " or ".join(repr(h) for h in hits) + "?)"
