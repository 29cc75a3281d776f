"""Per-sample tables as the stages store them: generation shards (the
generation cache) and run shards (the scored rows)."""

from __future__ import annotations

from typing import Any

from ..core.rowjson import dumps as _js
from ..core.rowjson import loads
from ..core.types import Score
from ..store.columns import mark_typed, score_columns

GEN_COLUMNS = ("shard", "index", "sample_id", "repeat", "generation")


def generation_table(shard: int, items: list[dict], generations: list[dict]):
    import pyarrow as pa

    return pa.table(
        {
            "shard": pa.array([shard] * len(items), pa.int32()),
            "index": pa.array(range(len(items)), pa.int32()),
            "sample_id": pa.array([it["request"]["sample_id"] for it in items], pa.string()),
            "repeat": pa.array([it["request"]["repeat"] for it in items], pa.int32()),
            "generation": pa.array([_js(g) for g in generations], pa.string()),
        }
    )


def generations_from_table(table) -> list[dict]:
    return [loads(g) for g in table.column("generation").to_pylist()]


def score_row(score: Score) -> dict[str, Any]:
    """A Score as the ``scores`` column stores it (``Score.to_json_dict``).
    A plain Score's own field dict is that already (the status an enum,
    which the JSON writes as its value), so it is used as it is: one per
    sample and metric, this is the stage's hottest conversion. Read only."""
    return score.__dict__ if type(score) is Score else score.to_json_dict()


def run_table(shard: int, items: list[dict], targets: list[Any], generations: list[dict],
              annotations: list[dict], scores: list[list[dict]], worker: dict):
    """One run shard's rows; ``targets[k]`` is item k's sample's ``target``."""
    import pyarrow as pa

    def col(key: str) -> list[Any]:
        return [g.get(key) for g in generations]

    js = _js

    n = len(items)
    return mark_typed(pa.table(
        {
            "shard": pa.array([shard] * n, pa.int32()),
            "index": pa.array(range(n), pa.int32()),
            "sample_id": pa.array([it["request"]["sample_id"] for it in items], pa.string()),
            "repeat": pa.array([it["request"]["repeat"] for it in items], pa.int32()),
            "choice": pa.array([it["request"].get("choice") for it in items], pa.int32()),
            "prompt": pa.array([p if isinstance(p := it["request"]["prompt"], str) else js(p) for it in items],
                               pa.string()),
            "target": pa.array([js(t) for t in targets], pa.string()),
            "text": pa.array(col("text"), pa.string()),
            "raw_text": pa.array(col("raw_text"), pa.string()),
            "error": pa.array(col("error"), pa.string()),
            "finish_reason": pa.array(col("finish_reason"), pa.string()),
            "prompt_tokens": pa.array(col("prompt_tokens"), pa.int64()),
            "completion_tokens": pa.array(col("completion_tokens"), pa.int64()),
            "token_source": pa.array(col("token_source"), pa.string()),
            "latency_s": pa.array(col("latency_s"), pa.float64()),
            "latency_scope": pa.array(col("latency_scope"), pa.string()),
            "tool_calls": pa.array([js(g.get("tool_calls")) for g in generations], pa.string()),
            "gen_metadata": pa.array([js(g.get("metadata") or {}) for g in generations], pa.string()),
            "annotations": pa.array([js(a) for a in annotations], pa.string()),
            "scores": pa.array([js(s) for s in scores], pa.string()),
            "worker": pa.array([js(worker)] * n, pa.string()),
            # each score's status and value (and statistics) in columns of their own: what comparisons read
            **score_columns(scores),
        }
    ))
