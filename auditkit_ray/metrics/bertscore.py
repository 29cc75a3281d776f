"""BERTScore (bert-score) from a local model, vectorised over a batch.

Parameters: ``model_path`` (a local Hugging Face model directory) and
``num_layers`` are required; the hub is never contacted. Scores are raw
cosine-similarity BERTScores unless ``baseline_path`` names a rescale
baseline CSV (``LAYER,P,R,F``, one row per layer 0..num_layers); bert-score's
functional API silently skips rescaling when no baseline ships for a model,
so rescaling here happens only when asked for, and then always.

Several references: bert-score's rule, the elementwise maximum of P, R and F
over the references. An empty candidate (or only empty references) gets raw
P = R = F = 0, as bert-score documents, rescaled like any other score.
IDF weighting is not offered: it would depend on which samples share a batch.
"""

from __future__ import annotations

import csv
import importlib.util
import math
import os
from typing import Any

from ..core.metric import Direction, Metric
from ..core.types import Generation, Sample, Score
from ..errors import MissingExtraError
from .lexical import hypothesis, references

_MEASURES = {"precision": 0, "recall": 1, "f1": 2}


def _read_baseline(path: str, num_layers: int) -> tuple[float, float, float]:
    """The (P, R, F) baseline row for ``num_layers`` from a bert-score CSV."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise TypeError(f"baseline_path: cannot read {path!r} ({exc.strerror})") from None
    if not rows or not {"P", "R", "F"} <= set(rows[0]):
        raise TypeError(f"baseline_path: {path!r} must be a CSV with columns LAYER,P,R,F")
    if len(rows) <= num_layers:
        raise TypeError(f"baseline_path: {path!r} has {len(rows)} rows, needs one per layer 0..{num_layers}")
    try:
        vals = tuple(float(rows[num_layers][k]) for k in ("P", "R", "F"))
    except ValueError:
        raise TypeError(f"baseline_path: row {num_layers} of {path!r} is not numeric") from None
    if any(not math.isfinite(v) or v >= 1 for v in vals):
        raise TypeError(f"baseline_path: row {num_layers} of {path!r} must hold finite values below 1")
    return vals  # type: ignore[return-value]


class BERTScore(Metric):
    """BERTScore F1 (or P/R) from a local model; vectorised in ``score_batch``."""

    name = "bertscore"
    direction = Direction.MAXIMIZE
    family = "lexical"
    requires = ("target",)
    description = (
        "BERTScore (bert-score) from a local model_path with explicit num_layers; rescaled only with baseline_path"
    )

    def __init__(self, *, model_path: str, num_layers: int, baseline_path: str | None = None, measure: str = "f1",
                 batch_size: int = 64, device: str | None = None, on: str | None = None) -> None:
        if not isinstance(model_path, (str, os.PathLike)) or not os.path.isdir(model_path):
            raise TypeError(f"model_path must be a local model directory, got {model_path!r}")
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise TypeError(f"num_layers must be a positive integer, not {num_layers!r}")
        if measure not in _MEASURES:
            raise TypeError(f"measure must be one of {sorted(_MEASURES)}, not {measure!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise TypeError(f"batch_size must be a positive integer, not {batch_size!r}")
        super().__init__(model_path=str(model_path), num_layers=num_layers,
                         baseline_path=None if baseline_path is None else str(baseline_path),
                         measure=measure, batch_size=batch_size, device=device, on=on)
        self.baseline = _read_baseline(str(baseline_path), num_layers) if baseline_path is not None else None
        if importlib.util.find_spec("bert_score") is None:
            raise MissingExtraError("bert_score", "bertscore")
        self._scorer: Any = None

    def _load(self) -> Any:
        if self._scorer is None:
            from bert_score import BERTScorer

            p = self.params
            self._scorer = BERTScorer(
                model_type=p["model_path"], num_layers=p["num_layers"], device=p["device"],
                batch_size=p["batch_size"],
                # bert-score insists on a language when rescaling; with a custom
                # baseline file it is used for nothing else
                lang="en" if self.baseline is not None else None,
                rescale_with_baseline=self.baseline is not None, baseline_path=p["baseline_path"],
            )
        return self._scorer

    def _rescale(self, raw: tuple[float, float, float]) -> tuple[float, float, float]:
        if self.baseline is None:
            return raw
        return tuple((v - b) / (1 - b) for v, b in zip(raw, self.baseline))  # type: ignore[return-value]

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score:
        res = self.score_batch([(sample, generation, context)])[0]
        if isinstance(res, Exception):
            raise res
        return res

    def score_batch(self, items: list[tuple[Sample, Generation, dict]]) -> list[Any]:
        out: list[Any] = [None] * len(items)
        todo: list[int] = []
        cands: list[str] = []
        refs: list[list[str]] = []
        for i, (s, g, c) in enumerate(items):
            try:
                rs = [r for r in references(s) if r.strip()]
                hyp = hypothesis(self, g, c)
            except Exception as exc:  # noqa: BLE001 - becomes this row's error
                out[i] = exc
                continue
            if not hyp.strip() or not rs:
                out[i] = self._make(self._rescale((0.0, 0.0, 0.0)),
                                    "empty candidate" if not hyp.strip() else "no non-empty reference")
                continue
            todo.append(i)
            cands.append(hyp)
            refs.append(rs)
        if todo:
            P, R, F = self._load().score(cands, refs, batch_size=self.params["batch_size"])
            for j, i in enumerate(todo):
                out[i] = self._make((float(P[j]), float(R[j]), float(F[j])), None)
        return out

    def _make(self, prf: tuple[float, float, float], reason: str | None) -> Score:
        value = prf[_MEASURES[self.params["measure"]]]
        if not all(math.isfinite(v) for v in prf):
            return Score.error(self.name, f"bert-score returned a non-finite score {prf}")
        return Score.scored(self.name, value, reason=reason,
                            metadata={"precision": prf[0], "recall": prf[1], "f1": prf[2],
                                      "rescaled": self.baseline is not None})


__all__ = ["BERTScore"]
