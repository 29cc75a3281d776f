"""The catalogue of what a run file can name: every registered backend,
metric, annotator, judge and oracle, with its direction, required fields and
the pip extra it needs (``auditkit-ray list``).

Judges and oracles are metrics (families ``judge`` and ``oracle``); they are
listed under their own kinds. A backend's required fields are the settings a
run file must give; a metric's are the Sample/Generation fields it reads
(``Metric.requires``); an annotator's are its required settings. ``extra`` is
the extra beyond the base install (``pip install 'auditkit-ray[EXTRA]'``),
``None`` when the base install is enough; a backend's settings class says its
own (``BackendSettings.extra``), and a user's metric class may declare its own
as ``extra = "..."``.
"""

from __future__ import annotations

import inspect
from typing import Any

from .errors import ConfigError

KINDS = ("backend", "metric", "annotator", "judge", "oracle")

#: the extra each built-in metric, judge and annotator needs beyond the base install (kind, name) -> extra
EXTRAS: dict[tuple[str, str], str] = {
    **{("metric", n): "metrics" for n in ("bleu", "chrf", "ter", "rouge", "rouge1", "rouge2", "rougeL", "rougeLsum",
                                          "wer", "json_schema_match", "tool_call_validity")},
    ("metric", "bertscore"): "bertscore",
    # the bipartite matching of calls to references (scipy)
    **{("metric", n): "stats" for n in ("tool_call_match", "argument_correctness", "parallel_calls",
                                        "tool_chain_order")},
    **{("judge", n): "judges" for n in ("g_eval", "factual_correctness", "grounding")},
    ("annotator", "model"): "judges",
}

_ANNOTATORS = {
    "regex": "the text a regular expression captures (first, last or n-th match)",
    "strip_reasoning": "the output without its reasoning blocks (<think>...</think>)",
    "take_first": "the first non-empty part of the output before a separator",
}


def kind_of(name: str) -> str:
    """``name`` (a kind, its plural or a prefix such as ``metrics``) as one of ``KINDS``; ConfigError otherwise."""
    k = name.strip().lower()
    for kind in KINDS:
        if k in (kind, kind + "s"):
            return kind
    raise ConfigError(f"unknown kind {name!r}: use one of {', '.join(KINDS)}")


def metric_kind(family: str) -> str:
    """The catalogue kind of a metric family: judges and oracles apart from the other metrics."""
    if family.startswith("judge"):
        return "judge"
    if family.startswith("oracle"):
        return "oracle"
    return "metric"


def _doc(obj: Any) -> str:
    """The first paragraph of a docstring, as plain text."""
    return _plain((inspect.getdoc(obj) or "").split("\n\n")[0].replace("\n", " ").strip())


def _plain(text: str) -> str:
    """``text`` without reStructuredText markup (``x``, :class:`X`): what a terminal shows is read, not built."""
    import re

    text = re.sub(r":[\w:]+:`~?([^`]+)`", r"\1", text or "")
    return re.sub(r"``([^`]+)``", r"\1", text)


def _required_settings(model: Any, skip: tuple[str, ...] = ("type",)) -> list[str]:
    return [n for n, f in model.model_fields.items() if f.is_required() and n not in skip]


def _backends() -> list[dict[str, Any]]:
    from .core.backends import backend_settings, backend_types

    out = []
    for t in backend_types():
        try:
            settings = backend_settings(t)
        except ConfigError as exc:  # a plugin whose module cannot be imported: listed, with why
            out.append({"kind": "backend", "name": t, "direction": None, "family": None, "requires": [],
                        "extra": None, "description": f"(cannot load: {exc})"})
            continue
        out.append({"kind": "backend", "name": t, "direction": None, "family": None,
                    "requires": _required_settings(settings), "extra": settings.extra,
                    "description": _doc(settings)})
    return out


def _metrics() -> list[dict[str, Any]]:
    from .core.metric import metric_info
    from .core.registry import builtin_names, resolve_metric

    out = []
    for n in builtin_names():
        try:
            cls = resolve_metric(n)
        except ConfigError as exc:
            out.append({"kind": "metric", "name": n, "direction": None, "family": None, "requires": [],
                        "extra": None, "description": f"(cannot load: {exc})"})
            continue
        info = metric_info(cls)
        kind = metric_kind(info["family"])
        out.append({"kind": kind, "name": n, "direction": info["direction"], "family": info["family"],
                    "requires": info["requires"], "extra": getattr(cls, "extra", None) or EXTRAS.get((kind, n)),
                    "description": _plain(info["description"])})
    return out


def _annotators() -> list[dict[str, Any]]:
    from typing import get_args

    from .config.models import AnnotatorSpec

    union = get_args(AnnotatorSpec)[0]
    out = []
    for model in get_args(union):
        t = get_args(model.model_fields["type"].annotation)[0]
        out.append({"kind": "annotator", "name": t, "direction": None, "family": None,
                    "requires": _required_settings(model), "extra": EXTRAS.get(("annotator", t)),
                    "description": _ANNOTATORS.get(t) or _doc(model)})
    return out


def catalogue(kind: str | None = None) -> list[dict[str, Any]]:
    """Every registered component (or those of one ``kind``), sorted by kind then name: each a dict of
    ``kind``, ``name``, ``direction`` (metrics, judges, oracles), ``family``, ``requires``, ``extra``,
    ``description``."""
    want = kind_of(kind) if kind else None
    rows: list[dict[str, Any]] = []
    if want in (None, "backend"):
        rows += _backends()
    if want in (None, "metric", "judge", "oracle"):
        rows += [r for r in _metrics() if want in (None, r["kind"])]
    if want in (None, "annotator"):
        rows += _annotators()
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(rows, key=lambda r: (order[r["kind"]], r["name"]))
