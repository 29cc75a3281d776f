"""A night's results never disappear behind one partial run (issue 51): ``/api/runs`` lists complete,
interrupted, failed and running runs side by side, and every filter and every page answers what it asks, whatever
order the store lists them in. The server is the real console script (``auditkit-ray view``), asked over HTTP;
each answer is checked against the fixture's own table of what it wrote."""

from __future__ import annotations

import json
import urllib.parse

import pytest

pytestmark = pytest.mark.timeout(180)

SWEEP = "night"


@pytest.fixture(scope="module")
def night(tmp_path_factory, kit):
    """9 complete runs (3 formats x 3 checkpoints, on two datasets and three days), one interrupted by Ctrl-C,
    one failed and one still running, in a sweep; the runs that did not finish sort last and first in the
    store's listing (one of them last, as the one that hid the others did)."""
    store = tmp_path_factory.mktemp("night") / "store"
    want = {}
    for i, (fmt, ckpt) in enumerate((f, c) for f in ("fp32", "bf16", "int8") for c in ("p0", "p25", "p50")):
        name = f"{fmt}/{ckpt}"
        day = f"2026-03-0{1 + i % 3}"
        dataset = "arith.jsonl" if i % 2 else "words.jsonl"
        cfg = kit.config_of(name, f"word-problems-{ckpt}")
        cfg["dataset"] = {"path": dataset}
        fp = kit.write_run(store, name, n=10, right=lambda k: k % 3, config=cfg, created_at=f"{day}T0{i}:00:00+00:00")
        want[fp] = {"name": name, "state": "complete", "model": f"word-problems-{ckpt}", "dataset": dataset,
                    "created_at": f"{day}T0{i}:00:00+00:00", "sweep": True}
    interrupted, failed, running = "f" * 64, "0" * 64, "7" * 64
    for fp in (interrupted, failed, running):
        (store / "runs" / fp / "s10").mkdir(parents=True)  # a partial run: its shards' folder, no result
    # what pipeline.plan.mark_interrupted writes when a run stops on Ctrl-C
    (store / "runs" / interrupted / "manifest.json").write_text(json.dumps(
        {"name": "fp32/p75", "fingerprint": interrupted, "state": "interrupted", "n_shards": 4, "shard_size": 10}))
    want[interrupted] = {"name": "fp32/p75", "state": "interrupted", "sweep": False}
    want[failed] = {"name": "bf16/p75", "state": "failed", "sweep": True}
    want[running] = {"name": "int8/p75", "state": "running", "sweep": True}
    sfp = "5" * 64
    (store / "sweeps" / sfp).mkdir(parents=True)
    (store / "sweeps" / sfp / "manifest.json").write_text(json.dumps({
        "name": SWEEP, "fingerprint": sfp, "cells": [],
        "runs": [{"name": w["name"], "fingerprint": fp, "state": "complete" if w["state"] == "complete" else
                  w["state"]} for fp, w in want.items() if w["sweep"]]}))
    v = kit.Viewer(["--store", str(store), "--port", "0"], tmp_path_factory.mktemp("night-log") / "view.log")
    yield {"viewer": v, "want": want, "sweep_fp": sfp}
    v.stop()


def _get(night, kit, **query) -> dict:
    status, body = kit.http(night["viewer"].base + "/api/runs?" + urllib.parse.urlencode(query))
    assert status == 200, body
    return json.loads(body)


def _expected(want: dict, **f) -> set[str]:
    """The fingerprints a filter must keep, from what the fixture wrote."""
    out = set()
    for fp, w in want.items():
        if "name" in f and f["name"].lower() not in w["name"].lower():
            continue
        if "model" in f and f["model"].lower() not in (w.get("model") or "").lower():
            continue
        if "dataset" in f and f["dataset"].lower() not in (w.get("dataset") or "").lower():
            continue
        if "sweep" in f and not w["sweep"]:
            continue
        if "fp" in f and not fp.startswith(f["fp"]):
            continue
        created = w.get("created_at") or ""
        if "since" in f and created[:len(f["since"])] < f["since"]:
            continue
        if "until" in f and created[:len(f["until"])] > f["until"]:
            continue
        out.add(fp)
    return out


def test_every_run_is_listed_whatever_its_state_with_its_own_name_and_state(night, kit):
    data = _get(night, kit)
    got = {r["fingerprint"]: r for r in data["runs"]}
    assert set(got) == set(night["want"]), sorted(r["name"] or "-" for r in data["runs"])
    assert data["total"] == data["matched"] == len(night["want"]) == 12
    for fp, w in night["want"].items():
        assert (got[fp]["name"], got[fp]["state"]) == (w["name"], w["state"]), got[fp]


@pytest.mark.parametrize("query", [
    {"name": "fp32"}, {"name": "p75"}, {"name": "BF16/P2"}, {"model": "p25"}, {"model": "word-problems"},
    {"dataset": "arith"}, {"sweep": SWEEP}, {"fp": "f"}, {"fp": "0000"}, {"since": "2026-03-02"},
    {"until": "2026-03-01"}, {"name": "int8", "dataset": "words"}, {"name": "no-such-run"},
], ids=lambda q: "&".join(f"{k}={v}" for k, v in q.items()))
def test_each_filter_keeps_exactly_the_runs_it_names_among_runs_of_every_state(night, kit, query):
    data = _get(night, kit, **query)
    got = {r["fingerprint"] for r in data["runs"]}
    assert got == _expected(night["want"], **query), sorted(night["want"][fp]["name"] for fp in got)
    assert data["matched"] == len(got) and data["total"] == 12


def test_a_sweep_named_by_its_fingerprint_prefix_keeps_its_runs(night, kit):
    data = _get(night, kit, sweep=night["sweep_fp"][:8])
    assert {r["fingerprint"] for r in data["runs"]} == _expected(night["want"], sweep=SWEEP)


@pytest.mark.parametrize("size", [1, 5, 50])
def test_pages_of_any_size_cover_every_run_once_in_the_listing_s_order(night, kit, size):
    whole = [r["fingerprint"] for r in _get(night, kit)["runs"]]
    paged = []
    for offset in range(0, 12, size):
        page = _get(night, kit, offset=offset, limit=size)
        assert page["offset"] == offset and page["limit"] == size and page["matched"] == 12
        assert len(page["runs"]) == min(size, 12 - offset)
        paged += [r["fingerprint"] for r in page["runs"]]
    assert paged == whole and len(set(paged)) == 12
    # a page of a filtered listing pages the matches
    fp32 = _get(night, kit, name="fp32", offset=1, limit=2)
    assert fp32["matched"] == 4 and len(fp32["runs"]) == 2
    assert [r["fingerprint"] for r in fp32["runs"]] == [r["fingerprint"] for r in _get(night, kit, name="fp32")
                                                        ["runs"]][1:3]


def test_a_page_out_of_range_is_empty_and_a_bad_one_is_a_400(night, kit):
    assert _get(night, kit, offset=40, limit=5)["runs"] == []
    for bad in ("offset=-1", "limit=-2", "limit=ten"):
        status, body = kit.http(night["viewer"].base + "/api/runs?" + bad)
        assert status == 400 and "error" in json.loads(body), (bad, status, body)
