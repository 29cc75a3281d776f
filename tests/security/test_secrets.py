"""A known secret planted as an API key (through ${VAR}) never appears in any
artifact: fingerprints, result JSON, per-sample tables, generation cache,
ExperimentDB, MLflow store and artifacts, reports, CLI output or Ray logs."""

import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("aiohttp", reason="the api backend needs the 'api' extra")

from auditkit_ray.cli import main  # noqa: E402
from auditkit_ray.testing import OpenAIServer, ScriptedPolicy  # noqa: E402

pytestmark = pytest.mark.usefixtures("ray_cluster", "library_warnings_on_stderr")
SECRET = "sk-planted-SECRET-4242-zzq"


def _files_with(root: Path, needle: bytes) -> list[str]:
    hits = []
    for f in root.rglob("*"):
        if f.is_file():
            try:
                if needle in f.read_bytes():
                    hits.append(str(f))
            except OSError:
                continue
    return hits


def test_planted_api_key_appears_in_no_artifact(make_spec, tmp_path, monkeypatch, capsys, ray_cluster):
    monkeypatch.setenv("AK_PLANTED_KEY", SECRET)
    with OpenAIServer(ScriptedPolicy(lambda body: "42"), api_key=SECRET) as server:
        spec = make_spec(
            model={"type": "api", "base_url": server.base_url, "model": "scripted", "api_key": "PLACEHOLDER",
                   "cache_path": str(tmp_path / "api-cache.sqlite")},
            tracking={"db": str(tmp_path / "index.sqlite"), "mlflow_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
                      "mlflow_artifact_location": str(tmp_path / "mlartifacts")},
            dataset={"limit": 8},
        )
        doc = spec.model_dump(mode="json", by_alias=True)
        doc["model"]["api_key"] = "${AK_PLANTED_KEY}"
        cfg = tmp_path / "run.yaml"
        cfg.write_text(yaml.safe_dump(doc))
        assert main(["validate", str(cfg)]) == 0
        assert main(["run", str(cfg), "--json"]) == 0
        out = capsys.readouterr()
        result = json.loads(out.out[out.out.index("{"):])
        assert result["metrics"]["exact_match"]["total"] == 8 and server.requests > 0  # the key worked
        run_dir = tmp_path / "store" / "runs" / result["fingerprint"]
        for fmt in ("html", "md", "junit", "json"):
            assert main(["report", str(run_dir), "--format", fmt, "--output", str(tmp_path / f"report.{fmt}")]) in (
                0,
                1,
            )
        assert main(["runs", "list", "--db", str(tmp_path / "index.sqlite"), "--json"]) == 0
        printed = capsys.readouterr()
    assert SECRET not in out.out + out.err + printed.out + printed.err
    assert SECRET not in json.dumps(result)
    assert _files_with(tmp_path, SECRET.encode()) == []
    session = Path(ray_cluster._private.worker._global_node.get_session_dir_path()) / "logs"
    assert _files_with(session, SECRET.encode()) == []
    assert (tmp_path / "report.html").stat().st_size > 0 and (tmp_path / "mlflow.db").exists()
