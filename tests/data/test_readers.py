import json

import pytest

from auditkit_ray import DataError
from auditkit_ray.config.models import DatasetSpec
from auditkit_ray.data import load_samples


def spec(path, **kw):
    return DatasetSpec(path=str(path), input_field="q", target_field="a", **kw)


ROWS = [{"id": "x1", "q": "one", "a": 1}, {"id": "x2", "q": "two", "a": "2"}]


def test_jsonl_json_csv_parquet_read_the_same_samples(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    (tmp_path / "d.json").write_text(json.dumps({"data": ROWS}))
    (tmp_path / "d.csv").write_text("id,q,a\nx1,one,1\nx2,two,2\n")
    pq.write_table(pa.Table.from_pylist([{**r, "a": str(r["a"])} for r in ROWS]), tmp_path / "d.parquet")
    got = [
        [(s.id, s.input, s.target) for s in load_samples(spec(tmp_path / f"d.{ext}"))[0]]
        for ext in ("jsonl", "json", "csv", "parquet")
    ]
    assert all(g == [("x1", "one", "1"), ("x2", "two", "2")] for g in got)


def test_hf_datasets_directory_from_a_local_path(tmp_path):
    datasets = pytest.importorskip("datasets", reason="the 'datasets' package comes with the dev extra")
    dd = datasets.DatasetDict({"test": datasets.Dataset.from_list(ROWS[:1] + [{"id": "x2", "q": "two", "a": 2}])})
    dd.save_to_disk(str(tmp_path / "hfds"))
    samples, _ = load_samples(spec(tmp_path / "hfds", split="test"))
    assert [s.id for s in samples] == ["x1", "x2"]
    with pytest.raises(DataError, match="split"):
        load_samples(spec(tmp_path / "hfds"))


def test_ids_are_content_derived_when_missing_and_stable(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"q": "a", "a": "1"}\n{"q": "b", "a": "2"}\n{"q": "a", "a": "1"}\n')
    ids1 = [s.id for s in load_samples(spec(p))[0]]
    ids2 = [s.id for s in load_samples(spec(p))[0]]
    assert ids1 == ids2 and len(set(ids1)) == 3 and ids1[2].startswith(ids1[0])


def test_duplicate_explicit_ids_name_both_lines(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"id": "z", "q": "a"}\n{"id": "y", "q": "a"}\n{"id": "z", "q": "b"}\n')
    with pytest.raises(DataError) as exc:
        load_samples(spec(p))
    assert f"{p}:3" in str(exc.value) and f"{p}:1" in str(exc.value) and "'z'" in str(exc.value)


@pytest.mark.parametrize(
    "content,needle",
    [
        (b'{"id": 1}\n{broken\n', ":2: invalid JSON"),
        (b"[1, 2]\n", "must be a JSON object"),
        (b"\xff\xfe\x00", "not valid UTF-8"),
    ],
)
def test_broken_files_name_file_and_line(tmp_path, content, needle):
    p = tmp_path / "d.jsonl"
    p.write_bytes(content)
    with pytest.raises(DataError, match=needle):
        load_samples(spec(p))


def test_missing_file_and_unknown_suffix(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_samples(spec(tmp_path / "nope.jsonl"))
    (tmp_path / "d.txt").write_text("x")
    with pytest.raises(DataError, match="format"):
        load_samples(spec(tmp_path / "d.txt"))


def test_limit_takes_the_first_rows(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(json.dumps({"id": str(i), "q": "x"}) for i in range(10)))
    assert [s.id for s in load_samples(spec(p, limit=3))[0]] == ["0", "1", "2"]
