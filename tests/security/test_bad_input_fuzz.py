"""Property-based bad input: every case ends in a clear, typed error (or a
recorded error/unknown score), never a traceback from deep inside."""

import json
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditkit_ray import ConfigError, DataError, ResultFormatError, RunResult
from auditkit_ray.agents.trace import from_openai_messages, read_jsonl_traces
from auditkit_ray.cli import main
from auditkit_ray.config import load_config, run_spec_from_dict
from auditkit_ray.config.models import DatasetSpec
from auditkit_ray.data import load_samples

FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=True), st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.text(max_size=8), c, max_size=4)),
    max_leaves=12,
)

VALID = {"model": {"type": "echo"}, "dataset": {"path": "d.jsonl"}, "metrics": ["exact_match"]}
KEYS = [
    "model",
    "dataset",
    "metrics",
    "prompt",
    "generation",
    "execution",
    "annotators",
    "seed",
    "repeats",
    "store",
    "bogus",
]


@FAST
@given(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6))
def test_config_loader_gives_config_errors_only(override):
    doc = {**VALID, **override}
    try:
        run_spec_from_dict(doc)
    except ConfigError as exc:
        assert str(exc) and "Traceback" not in str(exc)


@FAST
@given(st.binary(max_size=300))
def test_config_file_of_arbitrary_bytes_gives_config_error(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("cfg") / "run.yaml"
    p.write_bytes(data)
    try:
        load_config(p)
    except ConfigError:
        pass


@FAST
@given(
    st.lists(
        st.one_of(
            st.builds(
                lambda d: json.dumps(d),
                st.dictionaries(st.sampled_from(["id", "input", "target", "x"]), json_values, max_size=4),
            ),
            st.text(alphabet=string.printable, max_size=40),  # broken lines
            st.just('{"id": "dup", "input": "a"}'),  # duplicate ids
            st.just('{"input": "' + "x" * 100_000 + '"}'),  # a huge field
        ),
        max_size=8,
    ),
    st.booleans(),
)
def test_dataset_reader_gives_data_errors_or_samples(tmp_path_factory, lines, bad_utf8):
    p = tmp_path_factory.mktemp("ds") / "d.jsonl"
    raw = "\n".join(lines).encode()
    if bad_utf8:
        raw += b"\n\xff\xfe"
    p.write_bytes(raw)
    try:
        samples, _ = load_samples(DatasetSpec(path=str(p)))
    except DataError as exc:
        assert str(p) in str(exc) or "sample" in str(exc)
    else:
        assert len({s.id for s in samples}) == len(samples)


@FAST
@given(st.lists(json_values, max_size=6))
def test_openai_message_traces_give_data_errors(messages):
    try:
        from_openai_messages(messages)
    except DataError:
        pass


@FAST
@given(st.lists(st.one_of(st.text(max_size=60), st.builds(json.dumps, json_values)), max_size=6))
def test_jsonl_traces_give_data_errors(lines):
    try:
        read_jsonl_traces(lines)
    except DataError:
        pass


@FAST
@given(json_values)
def test_results_files_give_result_format_errors(tmp_path_factory, doc):
    p = tmp_path_factory.mktemp("res") / "result.json"
    p.write_text(json.dumps(doc))
    try:
        RunResult.load(p)
    except ResultFormatError:
        pass


def test_cli_on_a_newer_results_file_exits_2(tmp_path, capsys):
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"format": 99, "run_id": "x", "fingerprint": "f"}))
    assert main(["compare", str(p), str(p)]) == 2
    err = capsys.readouterr().err
    assert "format 99" in err and "Traceback" not in err
