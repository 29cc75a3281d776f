"""Metric registry: built-in names and ``package.module:Class`` references
resolve the same way. Built-ins are listed as import strings so that resolving
one name never imports the others (or anything heavy).

An installed package can name its metrics through the entry-point group
``auditkit_ray.metrics`` (the entry point's name is the metric's name in a
run file, its value ``module:Class``), read the first time a name is not
found otherwise::

    [project.entry-points."auditkit_ray.metrics"]
    my_metric = "mypkg.metrics:MyMetric"
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .metric import Metric

#: built-in metric name -> "module:Class"
BUILTIN: dict[str, str] = {
    "mc_accuracy": "auditkit_ray.metrics.likelihood:MCAccuracy",
    "mc_accuracy_norm": "auditkit_ray.metrics.likelihood:MCAccuracyNorm",
    "loglikelihood": "auditkit_ray.metrics.likelihood:LogLikelihood",
    "word_perplexity": "auditkit_ray.metrics.likelihood:WordPerplexity",
    "exact_match": "auditkit_ray.metrics.text:ExactMatch",
    "contains": "auditkit_ray.metrics.text:Contains",
    "token_f1": "auditkit_ray.metrics.text:TokenF1",
    "non_degenerate": "auditkit_ray.metrics.text:NonDegenerate",
    "output_length": "auditkit_ray.metrics.text:OutputLength",
    # generation
    "regex_match": "auditkit_ray.metrics.generation:RegexMatch",
    "numeric_match": "auditkit_ray.metrics.generation:NumericMatch",
    "json_valid": "auditkit_ray.metrics.generation:JsonValid",
    "json_schema_match": "auditkit_ray.metrics.generation:JsonSchemaMatch",
    # lexical
    "bleu": "auditkit_ray.metrics.lexical:Bleu",
    "chrf": "auditkit_ray.metrics.lexical:Chrf",
    "ter": "auditkit_ray.metrics.lexical:Ter",
    "rouge": "auditkit_ray.metrics.lexical:Rouge",
    "rouge1": "auditkit_ray.metrics.lexical:Rouge1",
    "rouge2": "auditkit_ray.metrics.lexical:Rouge2",
    "rougeL": "auditkit_ray.metrics.lexical:RougeL",
    "rougeLsum": "auditkit_ray.metrics.lexical:RougeLsum",
    "wer": "auditkit_ray.metrics.lexical:WordErrorRate",
    "bertscore": "auditkit_ray.metrics.bertscore:BERTScore",
    # retrieval (trec_eval definitions)
    "hit_rate_at_k": "auditkit_ray.metrics.retrieval:HitRateAtK",
    "precision_at_k": "auditkit_ray.metrics.retrieval:PrecisionAtK",
    "recall_at_k": "auditkit_ray.metrics.retrieval:RecallAtK",
    "mrr": "auditkit_ray.metrics.retrieval:MRR",
    "average_precision": "auditkit_ray.metrics.retrieval:AveragePrecision",
    "ndcg_at_k": "auditkit_ray.metrics.retrieval:NDCGAtK",
    "ndcg": "auditkit_ray.metrics.retrieval:NDCG",
    "r_precision": "auditkit_ray.metrics.retrieval:RPrecision",
    # deterministic RAG checks
    "evidence_recall": "auditkit_ray.metrics.rag:EvidenceRecall",
    "freshness": "auditkit_ray.metrics.rag:Freshness",
    "stale_hit_rate": "auditkit_ray.metrics.rag:StaleHitRate",
    "access_control_compliance": "auditkit_ray.metrics.rag:AccessControlCompliance",
    "unauthorized_hit_rate": "auditkit_ray.metrics.rag:UnauthorizedHitRate",
    "citation_validity": "auditkit_ray.metrics.rag:CitationValidity",
    "citation_precision": "auditkit_ray.metrics.rag:CitationPrecision",
    "citation_recall": "auditkit_ray.metrics.rag:CitationRecall",
    "numeric_correctness": "auditkit_ray.metrics.rag:NumericCorrectness",
    "abstention": "auditkit_ray.metrics.rag:Abstention",
    # red-team probe detectors (probes: in a run file)
    "refusal_rate": "auditkit_ray.metrics.probes:RefusalRate",
    "canary_leak": "auditkit_ray.metrics.probes:CanaryLeak",
    "instruction_hijack": "auditkit_ray.metrics.probes:InstructionHijack",
    # repeats (scope = "group")
    "pass_at_k": "auditkit_ray.metrics.repeats:PassAtK",
    "pass_hat_k": "auditkit_ray.metrics.repeats:PassHatK",
    "majority_vote": "auditkit_ray.metrics.repeats:MajorityVote",
    # agents: trajectory diagnostics (family "agent")
    "tool_call_match": "auditkit_ray.metrics.agent:ToolCallMatch",
    "argument_correctness": "auditkit_ray.metrics.agent:ArgumentCorrectness",
    "tool_chain_order": "auditkit_ray.metrics.agent:ToolChainOrder",
    "parallel_calls": "auditkit_ray.metrics.agent:ParallelCalls",
    "redundancy_ratio": "auditkit_ray.metrics.agent:RedundancyRatio",
    "loop_frequency": "auditkit_ray.metrics.agent:LoopFrequency",
    "tool_call_validity": "auditkit_ray.metrics.agent:ToolCallValidity",
    "permission_violations": "auditkit_ray.metrics.agent:PermissionViolations",
    "irrelevance": "auditkit_ray.metrics.agent:Irrelevance",
    # agents: outcome oracles (family "oracle"; the judge is "oracle-diagnostic")
    "agent_outcome": "auditkit_ray.oracles.builtin:AgentOutcome",
    "final_state": "auditkit_ray.oracles.builtin:FinalStateCheck",
    "artifact_check": "auditkit_ray.oracles.builtin:ArtifactAssertion",
    "answer_check": "auditkit_ray.oracles.builtin:AnswerAssertion",
    "custom_predicate": "auditkit_ray.oracles.builtin:CustomPredicateCheck",
    "judge_assertion": "auditkit_ray.oracles.builtin:JudgeAssertionCheck",
    "oracle": "auditkit_ray.oracles.base:GenericOracle",
    # judges (family "judge"): a backend + a prompt + a parser
    "g_eval": "auditkit_ray.judges.builtin:GEval",
    "factual_correctness": "auditkit_ray.judges.builtin:FactualCorrectness",
    "grounding": "auditkit_ray.judges.builtin:Grounding",
}
_USER: dict[str, type[Metric]] = {}
ENTRY_POINT_GROUP = "auditkit_ray.metrics"
_ENTRY_POINTS: dict[str, str] = {}
_entry_points_read: list[bool] = []


def _entry_point(name: str) -> str | None:
    """The ``module:Class`` an installed package's entry point gives ``name``, if any."""
    if not _entry_points_read:
        from importlib.metadata import entry_points

        _ENTRY_POINTS.update({ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)})
        _entry_points_read.append(True)
    return _ENTRY_POINTS.get(name)


def register_metric(name: str | None = None):
    """Class decorator: make a Metric subclass available by name in configs."""

    def deco(cls: type[Metric]) -> type[Metric]:
        if not (isinstance(cls, type) and issubclass(cls, Metric)):
            raise TypeError(f"{cls!r} is not a Metric subclass")
        _USER[name or cls.name] = cls
        return cls

    return deco


def builtin_names() -> list[str]:
    _entry_point("")
    return sorted(set(BUILTIN) | set(_USER) | set(_ENTRY_POINTS))


def resolve_metric(ref: str) -> type[Metric]:
    """Resolve a registered name or ``package.module:Class`` to a Metric class."""
    if ref in _USER:
        return _USER[ref]
    target = BUILTIN.get(ref) or _entry_point(ref) or ref
    if ":" not in target:
        from .suggest import did_you_mean

        raise ConfigError(f"unknown metric {ref!r}{did_you_mean(ref, builtin_names())}: use a registered name "
                          "(`auditkit-ray list metrics` lists them) or 'package.module:Class'")
    module_name, _, attr = target.partition(":")
    from .imports import import_user_module

    module = import_user_module(module_name, f"metric {ref!r}")
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ConfigError(f"metric {ref!r}: module {module_name!r} has no attribute {attr!r}")
    if not (isinstance(obj, type) and issubclass(obj, Metric)):
        raise ConfigError(f"metric {ref!r}: {target} is not a subclass of auditkit_ray.Metric")
    return obj


def build_metric(ref: str, params: dict[str, Any] | None = None, as_name: str | None = None) -> Metric:
    cls = resolve_metric(ref)
    kwargs = dict(params or {})
    try:
        metric = cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"metric {ref!r}: bad parameters {sorted(kwargs)}: {exc}") from None
    if as_name:
        metric.output_name = as_name  # the score's name in results ('as:' in a config)
    return metric
