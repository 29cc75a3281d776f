"""The precomputed backend reads stored outputs through the services the
actor layer lends it (``BackendServices``), never through the store itself."""

import pytest

from auditkit_ray.backends.base import Request
from auditkit_ray.backends.precomputed import PrecomputedBackend, PrecomputedSettings
from auditkit_ray.core.backends import create_backend
from auditkit_ray.errors import ConfigError, RunError


class FakeServices:
    def __init__(self, rows=None, records=None):
        self.rows, self.records, self.asked = rows or [], records or [], []

    def read_samples_table(self, path):
        self.asked.append(("table", path))
        return self.rows

    def read_records(self, path):
        self.asked.append(("records", path))
        return self.records


def _spec(path, **kw):
    return PrecomputedSettings(type="precomputed", path=str(path), **kw)


def test_without_services_it_says_what_is_missing(tmp_path):
    b = create_backend(_spec(tmp_path / "out.jsonl"), None)
    with pytest.raises(RunError, match="services"):
        b.load()


def test_a_stored_run_is_read_through_the_samples_table(tmp_path):
    (tmp_path / "result.json").write_text("{}")
    services = FakeServices(rows=[{"sample_id": "a", "repeat": 0, "text": "4", "raw_text": " 4 "},
                                  {"sample_id": "a", "repeat": 1, "text": None, "raw_text": None}])
    b = create_backend(_spec(tmp_path), None, services=services)
    assert isinstance(b, PrecomputedBackend) and b.services is services
    b.load()
    assert services.asked == [("table", str(tmp_path / "result.json"))]
    gens = b.generate([Request(sample_id="a", prompt="p"), Request(sample_id="a", prompt="p", repeat=1),
                       Request(sample_id="b", prompt="p")])
    assert (gens[0].text, gens[0].raw_text, gens[0].finish_reason) == ("4", " 4 ", "precomputed")
    assert gens[1].text == "" and gens[2].error and "'b'" in gens[2].error


def test_an_outputs_file_is_read_through_the_record_reader(tmp_path):
    path = tmp_path / "out.jsonl"
    services = FakeServices(records=[("out.jsonl:1", {"qid": 7, "answer": "x"}),
                                     ("out.jsonl:2", {"qid": 7, "answer": "y", "repeat": 1})])
    b = create_backend(_spec(path, id_field="qid", output_field="answer"), None, services=services)
    b.load()
    assert [
        g.text for g in b.generate([Request(sample_id="7", prompt=""), Request(sample_id="7", prompt="", repeat=1)])
    ] == ["x", "y"]
    bad = create_backend(_spec(path), None, services=FakeServices(records=[("out.jsonl:1", {"qid": 1})]))
    with pytest.raises(ConfigError, match="out.jsonl:1"):
        bad.load()
