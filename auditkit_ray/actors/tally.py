"""A shard's share of its run's summary (``ShardTally``), and the run's metrics.

The scoring actor that writes a shard tallies it from the rows it writes and
stores the tally in the shard's Parquet footer (``TALLY_KEY``); the driver
reads a shard it did not see scored (a resumed run) from that footer and the
shard's ``latency_s`` column, and tallies a shard written before footers
carried a tally from its rows, with the same code. It merges the tallies in
shard order (``pipeline.merge``). So a run's numbers do not depend on which
actor scored what, or when.

A tally holds no Python object per sample: counts, sums, the first few
errors and flaky samples, and the latencies as one compact array of
doubles (the percentiles need every value), so the driver's memory for a run
is a few hundred bytes a shard plus 8 bytes a sample.
"""

from __future__ import annotations

import json
import math
from array import array
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..core.aggregate import MeanStats
from ..core.registry import build_metric
from ..core.result import MAX_LISTED_FLAKY
from ..core.rowjson import loads as row_loads
from ..core.types import Score, Status

MAX_LISTED_ERRORS = 100

#: the stored rows' columns a tally reads
COLUMNS = ["sample_id", "repeat", "error", "scores", "latency_s", "latency_scope", "prompt_tokens", "completion_tokens",
           "token_source", "gen_metadata"]

#: the Parquet footer key (schema metadata) under which a run shard stores its tally (``ShardTally.to_json``)
TALLY_KEY = b"auditkit.tally"
#: the version of that JSON; a footer of another version is not read (the shard is tallied from its rows)
TALLY_VERSION = 1


@dataclass
class ShardTally:
    """What the run's summary needs from one shard's rows."""

    n_rows: int = 0
    stats: dict[str, MeanStats] = field(default_factory=dict)
    corpus: dict[str, list[float]] = field(default_factory=dict)
    errors: list[tuple[str, str, str]] = field(default_factory=list)  # (sample_id, stage, message), the first listed
    error_count: int = 0
    #: every row's latency (those that have one), as doubles
    latencies: array = field(default_factory=lambda: array("d"))
    scopes: set[str] = field(default_factory=set)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    token_source: str | None = None
    cost: float | None = None
    retries: int = 0
    cached: int = 0
    #: per score name: the first ``MAX_LISTED_FLAKY`` samples whose repeats disagree (``flaky_samples``), in row
    #: order, and how many there are in all
    flaky: dict[str, list[str]] = field(default_factory=dict)
    flaky_count: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of_rows(cls, rows: Iterable[dict[str, Any]], corpus_metrics: dict[str, Any],
                stored: bool = False) -> ShardTally:
        """Tally rows with ``COLUMNS``: ``scores`` a list of Scores and
        ``gen_metadata`` a dict, or (``stored``) both as the JSON text a
        stored shard holds. ``corpus_metrics``: output name -> metric, for the
        metrics whose summary is a corpus statistic."""
        t = cls()
        corpus, errors = t.corpus, t.errors
        values: dict[str, list[float]] = {}  # per score name: the scored values, in row order
        others: dict[str, list[Status]] = {}  # per score name: the other statuses
        scored, error, read = Status.SCORED, Status.ERROR, Score.read_json_dict
        outcomes: list[tuple[str, int, str, Status, Any]] = []  # (sample id, repeat, name, status, value)
        outcome = outcomes.append
        repeated = False
        for row in rows:
            t.n_rows += 1
            sid, rep = row["sample_id"], row.get("repeat") or 0
            repeated = repeated or rep > 0
            if row["error"]:
                t.error_count += 1
                if len(errors) < MAX_LISTED_ERRORS:
                    errors.append((row["sample_id"], "generation", row["error"]))
            for sc in row_loads(row["scores"]) if stored else row["scores"]:
                if type(sc) is dict:
                    sc = read(sc)
                name, status = sc.name, sc.status
                outcome((sid, rep, name, status, sc.value))
                vals = values.get(name)
                if vals is None:
                    vals = values[name] = []
                    others[name] = []
                if status is scored:
                    vals.append(sc.value)
                    if corpus_metrics and name in corpus_metrics:
                        stats = [float(x) for x in sc.metadata.get("stats") or []]
                        corpus[name] = corpus_metrics[name].combine(corpus[name], stats) if name in corpus else stats
                else:
                    others[name].append(status)
                    if status is error and not row["error"] and len(errors) < MAX_LISTED_ERRORS:
                        errors.append((row["sample_id"], f"metric:{name}", sc.reason or ""))
            if row["latency_s"] is not None:
                t.latencies.append(row["latency_s"])
                t.scopes.add(row["latency_scope"] or "batch")
            t.prompt_tokens += row["prompt_tokens"] or 0
            t.completion_tokens += row["completion_tokens"] or 0
            t.token_source = t.token_source or row["token_source"]
            meta = row_loads(row.get("gen_metadata") or "{}") if stored else row["gen_metadata"]
            if meta.get("cost") is not None:
                t.cost = (t.cost or 0.0) + float(meta["cost"])
            t.retries += int(meta.get("retries") or 0)
            t.cached += bool(meta.get("cached"))
        for name, vals in values.items():  # sums exactly rounded (fsum): the same whatever the order of the values
            counts = {st.value: 0 for st in Status}
            counts[scored.value] = len(vals)
            for st in others[name]:
                counts[st.value] += 1
            t.stats[name] = MeanStats(n=len(vals), total=math.fsum(vals), total_sq=math.fsum([v * v for v in vals]),
                                      binary=set(vals) <= {0.0, 1.0}, counts=counts)
        if repeated:
            flaky = flaky_samples(outcomes)
            t.flaky = {name: ids[:MAX_LISTED_FLAKY] for name, ids in flaky.items()}
            t.flaky_count = {name: len(ids) for name, ids in flaky.items()}
            for name, (g, ss, sn, nn) in _cluster_sums(outcomes).items():
                st = t.stats.get(name)
                if st is not None:
                    st.clusters, st.c_ss, st.c_sn, st.c_nn = g, ss, sn, nn
        return t


    def to_json(self) -> str:
        """The tally without its latencies (the shard's ``latency_s`` column holds them), for the footer."""
        stats = {name: {"n": st.n, "total": st.total, "total_sq": st.total_sq, "binary": st.binary,
                        "counts": st.counts, "clusters": st.clusters, "c_ss": st.c_ss, "c_sn": st.c_sn,
                        "c_nn": st.c_nn} for name, st in self.stats.items()}
        # the standard library writes a float as its shortest repr: it reads back to the same bits
        return json.dumps({"v": TALLY_VERSION, "n_rows": self.n_rows, "stats": stats, "corpus": self.corpus,
                           "errors": self.errors, "error_count": self.error_count, "scopes": sorted(self.scopes),
                           "n_latencies": len(self.latencies), "prompt_tokens": self.prompt_tokens,
                           "completion_tokens": self.completion_tokens, "token_source": self.token_source,
                           "cost": self.cost, "retries": self.retries, "cached": self.cached, "flaky": self.flaky,
                           "flaky_count": self.flaky_count}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes, latencies: array) -> ShardTally | None:
        """A tally from its footer JSON and the shard's latencies; None when the JSON is of another version
        or does not match the latencies given (the shard is then tallied from its rows)."""
        d = json.loads(text)
        if not isinstance(d, dict) or d.get("v") != TALLY_VERSION or d.get("n_latencies") != len(latencies):
            return None
        stats = {name: MeanStats(n=x["n"], total=x["total"], total_sq=x["total_sq"], binary=x["binary"],
                                 counts=dict(x["counts"]), clusters=x["clusters"], c_ss=x["c_ss"], c_sn=x["c_sn"],
                                 c_nn=x["c_nn"]) for name, x in d["stats"].items()}
        return cls(n_rows=d["n_rows"], stats=stats, corpus=d["corpus"], errors=[tuple(e) for e in d["errors"]],
                   error_count=d["error_count"], latencies=latencies, scopes=set(d["scopes"]),
                   prompt_tokens=d["prompt_tokens"], completion_tokens=d["completion_tokens"],
                   token_source=d["token_source"], cost=d["cost"], retries=d["retries"], cached=d["cached"],
                   flaky=d["flaky"], flaky_count=d["flaky_count"])


def _cluster_sums(outcomes: Iterable[tuple[str, int, str, Status, Any]]) -> dict[str, tuple[int, float, float, float]]:
    """Per score name over the samples with a scored value: (samples, sum s_g**2, sum s_g*n_g, sum n_g**2)."""
    per: dict[str, dict[str, list[float]]] = {}
    for sid, _rep, name, status, value in outcomes:
        if status is Status.SCORED:
            per.setdefault(name, {}).setdefault(sid, []).append(float(value))
    out = {}
    for name, groups in per.items():
        sums = [(math.fsum(v), len(v)) for v in groups.values()]
        out[name] = (len(sums), math.fsum(s * s for s, _ in sums), math.fsum(s * k for s, k in sums),
                     float(sum(k * k for _, k in sums)))
    return out


def flaky_samples(outcomes: Iterable[tuple[str, int, str, Status, Any]]) -> dict[str, list[str]]:
    """Per score name, the samples whose repeats disagree: two repeats' scores differ in status or value.

    ``outcomes`` are (sample id, repeat, name, status, value) in row order. A sample with several requests
    per repeat (one per choice) compares each request with the same request of the other repeats: the k-th
    row of a (sample, repeat) is its k-th request. A metric scored once per sample (scope "group") has
    nothing to compare and is never flaky."""
    first: dict[tuple[str, str, int], tuple[Status, Any]] = {}
    nth: dict[tuple[str, str, int], int] = {}
    out: dict[str, dict[str, None]] = {}
    for sid, rep, name, status, value in outcomes:
        k = nth[(name, sid, rep)] = nth.get((name, sid, rep), -1) + 1
        seen = first.setdefault((name, sid, k), (status, value))
        if seen != (status, value):
            out.setdefault(name, {})[sid] = None
    return {name: list(ids) for name, ids in out.items()}


def corpus_metrics(metrics: Iterable[Any]) -> dict[str, Any]:
    """Output name -> metric, for the metrics whose summary is a corpus statistic."""
    return {m.output_name: m for m in metrics if m.aggregation == "corpus"}


def run_metrics(spec: Any) -> list[Any]:
    """The run's metric objects, as its config names them."""
    out = []
    for m in spec.metrics:
        params = dict(m.params)
        if m.on is not None:
            params["on"] = m.on
        out.append(build_metric(m.name, params, m.as_))
    return out
