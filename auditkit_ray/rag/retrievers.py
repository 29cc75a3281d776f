"""Lexical retrievers: BM25 (Okapi, k1=1.5, b=0.75) and TF-IDF cosine.

Ranking is by descending score; ties are broken by document id ascending, so
a ranking never depends on corpus order or hash seeds. Scores are rounded to
12 significant digits before sorting so that floating-point noise cannot
reorder equal scores.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from .corpus import Corpus

_TOKEN = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the to was were what which who with "
    "how many much does do".split()
)


def tokenize(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


def _rank(scores: dict[str, float], k: int) -> list[tuple[str, float]]:
    items = [(d, float(f"{s:.12g}")) for d, s in scores.items() if s > 0]
    items.sort(key=lambda x: (-x[1], x[0]))
    return items[:k]


class BM25:
    name = "bm25"

    def __init__(self, corpus: Corpus, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.tfs = {d.id: Counter(tokenize(f"{d.title} {d.text}")) for d in corpus.docs}
        self.lens = {d: sum(tf.values()) for d, tf in self.tfs.items()}
        self.avg = sum(self.lens.values()) / max(1, len(self.lens))
        df: Counter = Counter()
        for tf in self.tfs.values():
            df.update(tf.keys())
        n = len(self.tfs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.postings: dict[str, list[str]] = {}
        for d, tf in self.tfs.items():
            for t in tf:
                self.postings.setdefault(t, []).append(d)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        scores: dict[str, float] = {}
        for t in set(tokenize(query)):
            idf = self.idf.get(t)
            if idf is None:
                continue
            for d in self.postings[t]:
                f = self.tfs[d][t]
                norm = f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * self.lens[d] / self.avg))
                scores[d] = scores.get(d, 0.0) + idf * norm
        return _rank(scores, k)


class TFIDF:
    name = "tfidf"

    def __init__(self, corpus: Corpus) -> None:
        tfs = {d.id: Counter(tokenize(f"{d.title} {d.text}")) for d in corpus.docs}
        df: Counter = Counter()
        for tf in tfs.values():
            df.update(tf.keys())
        n = len(tfs)
        self.idf = {t: math.log((1 + n) / (1 + f)) + 1 for t, f in df.items()}
        self.vecs: dict[str, dict[str, float]] = {}
        for d, tf in tfs.items():
            v = {t: (1 + math.log(c)) * self.idf[t] for t, c in tf.items()}
            norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
            self.vecs[d] = {t: x / norm for t, x in v.items()}

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        tf = Counter(t for t in tokenize(query) if t in self.idf)
        q = {t: (1 + math.log(c)) * self.idf[t] for t, c in tf.items()}
        norm = math.sqrt(sum(x * x for x in q.values())) or 1.0
        scores = {}
        for d, v in self.vecs.items():
            s = sum(w / norm * v.get(t, 0.0) for t, w in q.items())
            if s:
                scores[d] = s
        return _rank(scores, k)


def make_retriever(kind: str, corpus: Corpus, params: dict[str, Any] | None = None):
    params = params or {}
    if kind == "bm25":
        return BM25(corpus, **params)
    if kind == "tfidf":
        return TFIDF(corpus, **params)
    raise ValueError(f"unknown retriever {kind!r} (bm25, tfidf, precomputed)")
