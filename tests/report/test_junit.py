"""JUnit XML validates against the Jenkins xUnit JUnit schema (tests/report/data/junit-10.xsd)."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from auditkit_ray.errors import ConfigError
from auditkit_ray.report.junit import format_junit

xmlschema = pytest.importorskip("xmlschema", reason="the dev extra installs xmlschema")

XSD = Path(__file__).parent / "data" / "junit-10.xsd"


@pytest.fixture(scope="module")
def schema():
    return xmlschema.XMLSchema(str(XSD))


def _valid(schema, text: str) -> ET.Element:
    schema.validate(text)  # raises XMLSchemaValidationError with the path of the first problem
    return ET.fromstring(text.encode())


def test_the_schema_rejects_what_ci_systems_reject(schema):
    # a sanity check of the vendored schema itself: a test case without a name is invalid
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        schema.validate(
            '<testsuites><testsuite name="s" tests="1" failures="0" errors="0"><testcase/></testsuite></testsuites>'
        )


def test_per_metric_cases_validate_and_a_failing_gate_fails_its_case(schema, sweep_dir, report_of, kit):
    report = report_of(sweep_dir, fail_under={"exact_match": 0.7})
    root = _valid(schema, format_junit(report, per="metric"))
    suites = root.findall("testsuite")
    assert len(suites) == len(kit.GRID)
    assert all(len(s.findall("testcase")) == 3 for s in suites)
    failed = [
        (s.get("name"), c.get("name")) for s in suites for c in s.findall("testcase") if c.find("failure") is not None
    ]
    assert sorted(failed) == sorted([("tiny/path=tiny-model-p50/quantization=None", "exact_match"),
                                     ("tiny/path=tiny-model-p50/quantization=int8-dynamic", "exact_match")])
    assert root.get("tests") == str(3 * len(kit.GRID)) and root.get("failures") == "2"
    case = next(c for c in suites[2].findall("testcase") if c.get("name") == "exact_match")
    assert "is under 0.7" in case.find("failure").get("message")
    props = {p.get("name"): p.get("value") for p in suites[0].find("properties")}
    assert props["fingerprint"] == report.runs[0].result.fingerprint


def test_a_regression_gate_against_the_baseline_fails_the_regressed_metric(schema, sweep_dir, sweep_runs, report_of):
    report = report_of(sweep_dir, baseline=str(sweep_runs[0]), max_regression={"exact_match": "10%"})
    root = _valid(schema, format_junit(report))
    failed = {
        s.get("name") for s in root.findall("testsuite") for c in s.findall("testcase") if c.find("failure") is not None
    }
    assert failed == {
        "tiny/path=tiny-model-p50/quantization=None",
        "tiny/path=tiny-model-p50/quantization=int8-dynamic",
        "tiny/path=tiny-model-p25/quantization=int8-dynamic",
    }


def test_per_sample_cases_fail_wrong_answers_error_on_errors_and_skip_unknowns(schema, tmp_path, kit, report_of):
    ids = kit.sample_ids()
    right = set(ids[:30])  # the hostile sample (last) is wrong: its text must still make valid XML
    run = kit.write_run(tmp_path, "r", accuracy=0, seed=3, right=right, errors=("q001",), unknown=("q002",),
                       unknown_metrics=("exact_match", "token_f1"))
    root = _valid(schema, format_junit(report_of(run), per="sample"))
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    # exact_match and token_f1 are not both binary: token_f1 has partial credit, so it is left out
    assert set(suites) == {"r / exact_match"}
    s = suites["r / exact_match"]
    cases = s.findall("testcase")
    assert len(cases) == kit.N
    by_name = {c.get("name"): c for c in cases}
    wrong = {c.get("name") for c in cases if c.find("failure") is not None}
    assert wrong == set(ids[30:]), wrong
    assert by_name["q001"].find("error") is not None and by_name["q001"].find("failure") is None
    assert by_name["q002"].find("skipped") is not None and "unknown" in by_name["q002"].find("skipped").get("message")
    assert s.get("failures") == str(len(ids) - 30) and s.get("errors") == "1" and s.get("skipped") == "1"
    hostile = by_name[kit.HOSTILE_ID].find("failure")
    assert "<script>alert('x')</script>" in hostile.text and "\x01" not in hostile.text and "\ufffd" in hostile.text
    props = {p.get("name"): p.get("value") for p in s.find("properties")}
    assert props["non_binary_metrics_left_out"] == "token_f1, output_length"


def test_per_sample_without_a_binary_metric_is_a_usage_error(tmp_path, kit, report_of):
    run = kit.write_run(tmp_path, "r", accuracy=0.5, seed=3)
    with pytest.raises(ConfigError, match="--junit-per metric"):
        format_junit(report_of(run, metrics=["token_f1"]), per="sample")
