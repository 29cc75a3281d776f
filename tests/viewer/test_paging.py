"""The viewer and the HTML report page through a run's samples from its Parquet files: a page reads the files
that hold it and no others, whatever the run's size, and what a page shows is what reading the whole table
would show (issue 53)."""

import json

from auditkit_ray.report.browse import ResultsBrowser
from auditkit_ray.store import paging


def opened_files(monkeypatch) -> list[str]:
    """The per-sample files ``PagedTable`` opens from now on (footers read for the row counts are not opened)."""
    seen: list[str] = []
    real = paging.PagedTable._file

    def spy(self, k):
        if k not in self._open:
            seen.append(self.names[k])
        return real(self, k)

    monkeypatch.setattr(paging.PagedTable, "_file", spy)
    return seen


def test_a_page_of_a_large_run_reads_only_the_files_that_hold_it(tmp_path, monkeypatch, kit):
    write_run = kit.write_run
    store = tmp_path / "store"
    fp = write_run(store, "big", n=20_000, right=lambda i: i % 3, shard_size=1_000)  # 20 files
    browser = ResultsBrowser([str(store)])
    seen = opened_files(monkeypatch)
    first = browser.samples(fp, offset=0, limit=50)
    assert first["total"] == 20_000 and [r["sample_id"] for r in first["rows"]] == [f"s{i:06d}" for i in range(50)]
    assert len(seen) == 1 and seen[0].endswith("shard-00000.parquet")
    seen.clear()
    across = browser.samples(fp, offset=12_980, limit=40)  # the end of one file and the start of the next
    assert [r["sample_id"] for r in across["rows"]] == [f"s{i:06d}" for i in range(12_980, 13_020)]
    assert sorted(s.rsplit("/", 1)[1] for s in seen) == ["shard-00012.parquet", "shard-00013.parquet"]


def test_a_filtered_page_equals_the_filter_applied_to_the_whole_table(tmp_path, kit):
    import pyarrow.parquet as pq

    write_run = kit.write_run
    store = tmp_path / "store"
    fp = write_run(store, "f", n=3_000, right=lambda i: i % 7 != 3, shard_size=400,
                   outputs={"s000123": "Needle in a haystack", "s002950": "another NEEDLE"})
    browser = ResultsBrowser([str(store)])
    rows = pq.ParquetDataset(next((store / "runs" / fp).glob("s*"))).read().to_pylist()
    scores = [{s["name"]: s for s in json.loads(r["scores"])} for r in rows]
    wrong = [r["sample_id"] for r, s in zip(rows, scores) if s["exact_match"]["value"] == 0.0]
    got = browser.samples(fp, metric="exact_match", score_max=0.0, offset=10, limit=30)
    assert got["matched"] == len(wrong) and [r["sample_id"] for r in got["rows"]] == wrong[10:40]
    long = [r["sample_id"] for r, s in zip(rows, scores) if s["length"]["value"] >= 20]
    got = browser.samples(fp, metric="length", score_min=20.0, limit=500)
    assert got["matched"] == len(long) and [r["sample_id"] for r in got["rows"]] == long[:500]
    hits = browser.samples(fp, search="needle")
    assert [r["sample_id"] for r in hits["rows"]] == ["s000123", "s002950"] and hits["matched"] == 2
    assert browser.samples(fp, status="error")["matched"] == 0
    assert browser.samples(fp, status="scored", metric="length")["matched"] == 3_000


def test_the_html_report_picks_its_worst_samples_from_columns_as_it_did_from_every_row(tmp_path, kit):
    write_run = kit.write_run
    from auditkit_ray.compare.samples import load
    from auditkit_ray.report.loader import read_samples, sample_view

    store = tmp_path / "store"
    fp = write_run(store, "r", n=4_000, right=lambda i: i % 11 != 5, shard_size=500)
    run = load(store / "runs" / fp)
    view, why = sample_view(run)
    assert why is None and view.total == 4_000
    directions = {m: s.direction for m, s in run.result.metrics.items()}
    worst, what = view.worst(["exact_match", "length"], directions, 25)
    # the same choice over every row read whole (the report's rows before it paged)
    rows, _ = read_samples(run)
    wrong = [r for r in rows if r.value("exact_match") == 0.0]
    wrong.sort(key=lambda r: (r.value("exact_match"), -r.value("length"), r.sample_id, r.repeat))
    assert [r.sample_id for r in worst] == [r.sample_id for r in wrong[:25]]
    assert what == f"{len(wrong)} wrong on exact_match or errored"
    assert view.binary("exact_match") and not view.binary("length")
