"""Core contracts: no Ray, no torch; stdlib and pydantic only."""

from .aggregate import MeanStats, summarize, wilson_interval
from .fingerprint import canonical_json, fingerprint
from .metric import Direction, Metric, MissingEvidence
from .registry import build_metric, register_metric, resolve_metric
from .result import FORMAT_VERSION, MetricSummary, Perf, RunResult, TokenUsage, load_run
from .types import Generation, Message, Sample, Score, Status, ToolCall, content_id

__all__ = [
    "Direction", "FORMAT_VERSION", "Generation", "MeanStats", "Message", "Metric", "MetricSummary",
    "MissingEvidence", "Perf", "RunResult", "Sample", "Score", "Status", "TokenUsage", "ToolCall",
    "build_metric", "canonical_json", "content_id", "fingerprint", "load_run", "register_metric",
    "resolve_metric", "summarize", "wilson_interval",
]
