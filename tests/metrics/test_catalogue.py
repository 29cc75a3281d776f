"""Every library metric is registered, listed by `auditkit-ray metrics`, and
declares a direction, a family and a one-line description."""

import json

import pytest

from auditkit_ray.cli import main
from auditkit_ray.core.metric import Direction, Metric
from auditkit_ray.core.registry import BUILTIN, resolve_metric

EXPECTED = {
    # name: (direction, family)
    "regex_match": ("maximize", "generation"),
    "numeric_match": ("maximize", "generation"),
    "json_valid": ("maximize", "generation"),
    "json_schema_match": ("maximize", "generation"),
    "bleu": ("maximize", "lexical"),
    "chrf": ("maximize", "lexical"),
    "ter": ("minimize", "lexical"),
    "rouge": ("maximize", "lexical"),
    "rouge1": ("maximize", "lexical"),
    "rouge2": ("maximize", "lexical"),
    "rougeL": ("maximize", "lexical"),
    "rougeLsum": ("maximize", "lexical"),
    "wer": ("minimize", "lexical"),
    "bertscore": ("maximize", "lexical"),
    "hit_rate_at_k": ("maximize", "retrieval"),
    "precision_at_k": ("maximize", "retrieval"),
    "recall_at_k": ("maximize", "retrieval"),
    "mrr": ("maximize", "retrieval"),
    "average_precision": ("maximize", "retrieval"),
    "ndcg_at_k": ("maximize", "retrieval"),
    "r_precision": ("maximize", "retrieval"),
    "ndcg": ("maximize", "retrieval"),
    "evidence_recall": ("maximize", "rag"),
    "freshness": ("maximize", "rag"),
    "stale_hit_rate": ("minimize", "rag"),
    "access_control_compliance": ("maximize", "rag"),
    "unauthorized_hit_rate": ("minimize", "rag"),
    "citation_validity": ("maximize", "rag"),
    "citation_precision": ("maximize", "rag"),
    "citation_recall": ("maximize", "rag"),
    "numeric_correctness": ("maximize", "rag"),
    "abstention": ("maximize", "rag"),
    "pass_at_k": ("maximize", "repeats"),
    "pass_hat_k": ("maximize", "repeats"),
    "majority_vote": ("maximize", "repeats"),
}
CORPUS = {"bleu", "chrf", "ter", "wer"}
GROUP = {"pass_at_k", "pass_hat_k", "majority_vote"}


def test_metrics_command_lists_every_library_metric_with_direction_and_family(capsys):
    assert main(["metrics", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    missing = set(EXPECTED) - set(rows)
    assert not missing, f"not listed: {sorted(missing)}"
    for name, (direction, family) in EXPECTED.items():
        row = rows[name]
        assert (row["direction"], row["family"]) == (direction, family), name
        assert row["description"] and "\n" not in row["description"], name


def test_metrics_command_plain_text_shows_arrows_for_direction(capsys):
    assert main(["metrics"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert "↓ minimize" in lines["stale_hit_rate"] and "↑ maximize" in lines["ndcg_at_k"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_registered_class_declares_its_contract(name):
    cls = resolve_metric(name)
    assert issubclass(cls, Metric) and isinstance(cls.direction, Direction)
    assert cls.name == name and BUILTIN[name].startswith("auditkit_ray.metrics.")
    assert cls.description and cls.family in {"generation", "lexical", "retrieval", "rag", "repeats"}
    assert (cls.aggregation == "corpus") == (name in CORPUS)
    assert (cls.scope == "group") == (name in GROUP)


def test_resolving_every_metric_module_imports_no_heavy_package():
    import subprocess
    import sys

    heavy = ["torch", "transformers", "sacrebleu", "rouge_score", "bert_score", "jsonschema", "scipy", "numpy", "nltk"]
    code = ("import sys; from auditkit_ray.core.registry import resolve_metric;"
            f"[resolve_metric(n) for n in {sorted(EXPECTED)!r}];"
            f"print(','.join(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"heavy modules imported by the metric modules: {out.stdout.strip()}"
