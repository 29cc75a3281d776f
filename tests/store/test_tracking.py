"""ExperimentDB (SQLite index, rebuildable from the store) and the MLflow mirror
against a real MLflow tracking store (SQLite backend)."""

import json

import pytest

from auditkit_ray.api import evaluate
from auditkit_ray.store.base import open_store
from auditkit_ray.store.db import ExperimentDB

pytestmark = pytest.mark.usefixtures("ray_cluster", "library_warnings_on_stderr")


def test_deleting_the_index_and_syncing_from_the_store_restores_the_same_query_answers(make_spec, tmp_path):
    db_path = tmp_path / "index.sqlite"
    tracking = {"db": str(db_path)}
    a = evaluate(make_spec("st", tracking=tracking, experiment={"name": "e1", "tags": {"team": "red"}}))
    b = evaluate(make_spec("st", tracking=tracking, name="other", model={"type": "simulated", "output": "prompt"},
                           experiment={"name": "e1", "tags": {"team": "blue"}}))
    db = ExperimentDB(db_path)
    queries = [
        {},
        {"metrics": ["exact_match>=0.5"]},
        {"metrics": ["exact_match<0.5"]},
        {"tags": {"team": "blue"}},
        {"dataset": "arith"},
        {"model": "simulated", "experiment": "e1"},
    ]
    before = [[r["fingerprint"] for r in db.query(**q)] for q in queries]
    assert before[1] == [a.fingerprint] and before[2] == [b.fingerprint] and before[3] == [b.fingerprint]
    assert len(before[0]) == 2
    db_path.unlink()
    rebuilt = ExperimentDB(db_path)
    assert rebuilt.query() == []
    assert rebuilt.sync(open_store(str(tmp_path / "st"))) == 2
    after = [[r["fingerprint"] for r in rebuilt.query(**q)] for q in queries]
    assert after == before
    shown = rebuilt.get(a.fingerprint[:10])
    assert shown["metrics"]["exact_match"]["mean"] == 1.0 and shown["config"]["name"] == "t"


def test_mlflow_mirror_logs_params_metrics_tags_and_artifacts(make_spec, tmp_path):
    pytest.importorskip("mlflow", reason="the MLflow mirror needs the 'mlflow' extra (make test installs it)")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = make_spec(tracking={"mlflow_uri": uri, "mlflow_experiment": "ak-test",
                               "mlflow_artifact_location": str(tmp_path / "artifacts")},
                     annotators=[{"type": "regex", "name": "num", "pattern": r"(\d+)"}],
                     metrics=["exact_match", {"name": "exact_match", "on": "num"}])
    res = evaluate(spec)
    rid = res.metadata["mlflow_run_id"]
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(rid)
    assert run.data.params["model.type"] == "simulated"
    assert run.data.params["generation.max_new_tokens"] == "32"
    assert run.data.metrics["exact_match"] == 1.0 and run.data.metrics["exact_match.n"] == 40
    assert "exact_match.on.num" in run.data.metrics and "exact_match.ci_low" in run.data.metrics
    assert run.data.tags["auditkit.fingerprint"] == res.fingerprint
    assert run.data.tags["auditkit.package_version"] == res.package_version
    arts = {a.path for a in client.list_artifacts(rid)}
    assert {"result.json", "samples.parquet"} <= arts
    local = client.download_artifacts(rid, "result.json", str(tmp_path))
    assert json.loads(open(local).read())["fingerprint"] == res.fingerprint
