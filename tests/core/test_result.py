import json

import pytest

from auditkit_ray import ResultFormatError, RunResult, load_run
from auditkit_ray.core.result import FORMAT_VERSION, MetricSummary


def _result():
    return RunResult(
        run_id="r1", fingerprint="f" * 64,
        metrics={"exact_match": MetricSummary(name="exact_match", direction="maximize", mean=0.5, n=2, total=3)},
    )


def test_round_trip(tmp_path):
    p = _result().save(tmp_path / "result.json")
    back = load_run(p)
    assert back == _result()
    assert json.loads(p.read_text())["format"] == FORMAT_VERSION == 1
    assert load_run(tmp_path) == back  # a run directory works too


def test_newer_format_is_refused_naming_both_versions(tmp_path):
    data = json.loads(_result().to_json())
    data["format"] = FORMAT_VERSION + 1
    p = tmp_path / "new.json"
    p.write_text(json.dumps(data))
    with pytest.raises(ResultFormatError) as exc:
        load_run(p)
    msg = str(exc.value)
    assert f"format {FORMAT_VERSION + 1}" in msg and f"format {FORMAT_VERSION}" in msg and str(p) in msg


def test_older_format_is_upgraded(tmp_path, monkeypatch):
    from auditkit_ray.core import result as result_mod

    data = json.loads(_result().to_json())
    data["format"] = 0
    data["legacy_field"] = "x"

    def up(d):
        d.pop("legacy_field")
        d["format"] = 1
        return d

    monkeypatch.setitem(result_mod._UPGRADERS, 0, up)
    p = tmp_path / "old.json"
    p.write_text(json.dumps(data))
    assert load_run(p) == _result()


@pytest.mark.parametrize(
    "content,needle",
    [
        ("{not json", "not valid JSON"),
        ("[]", "not a results object"),
        ('{"run_id": 1}', "format"),
        ('{"format": 1, "run_id": "x"}', "fingerprint"),
    ],
)
def test_malformed_results_files_get_clear_errors(tmp_path, content, needle):
    p = tmp_path / "r.json"
    p.write_text(content)
    with pytest.raises(ResultFormatError, match=needle):
        load_run(p)
