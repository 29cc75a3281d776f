"""The ``api`` backend and API judges through the real Ray pipeline, against
the OpenAI-compatible test server on 127.0.0.1 (scripted policy: injected
429s, 5xx, 401s, malformed bodies, unparseable judge replies)."""

import json
import os
import re
import socket
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the api backend needs the 'api' extra (aiohttp)")

from inflight import InFlight  # noqa: E402  (tests/support)

from auditkit_ray.api import evaluate, samples_table  # noqa: E402
from auditkit_ray.testing import OpenAIServer, ScriptedPolicy  # noqa: E402

pytestmark = pytest.mark.usefixtures("ray_cluster")

KEY = "sk-pipeline-planted-8c1f2e"
_Q = re.compile(r"What is (\d+) plus (\d+)\?")


def solve(body: dict) -> str:
    m = _Q.search(body["messages"][-1]["content"])
    return str(int(m.group(1)) + int(m.group(2))) if m else "?"


def api_model(server: OpenAIServer, tmp_path: Path, **kw) -> dict:
    return {"type": "api", "base_url": server.base_url, "model": "scripted", "api_key": KEY, "backoff_s": 0.01,
            "max_retries": 2, "cache_path": str(tmp_path / "api-cache.sqlite"), **kw}


def first_operand(arith: Path) -> dict[str, int]:
    return {r["id"]: int(_Q.search(r["question"]).group(1)) for r in map(json.loads, arith.read_text().splitlines())}


def generations(store: Path) -> dict[str, dict]:
    import pyarrow.parquet as pq

    out = {}
    for f in sorted(store.glob("generations/*/s*/shard-*.parquet")):
        for row in pq.read_table(f).to_pylist():
            out[row["sample_id"]] = json.loads(row["generation"])
    return out


def nz(counts: dict) -> dict:
    return {k: v for k, v in counts.items() if v}


def statuses(result, metric: str) -> dict[str, dict]:
    out = {}
    for row in samples_table(result).to_pylist():
        for s in json.loads(row["scores"]):
            if s["name"] == metric:
                out[row["sample_id"]] = s
    return out


def test_api_faults_every_sample_ends_scored_or_error_none_lost_and_retries_are_counted(make_spec, arith, tmp_path):
    a = first_operand(arith)
    faults = [{"match": "What is 0 plus", "status": 429, "times": 2, "retry_after": 0.01},
              {"match": "What is 3 plus", "status": 503, "times": 1},
              {"match": "What is 6 plus", "status": 500}]
    with OpenAIServer(ScriptedPolicy(solve, faults=faults), api_key=KEY) as server:
        res = evaluate(make_spec(model=api_model(server, tmp_path), execution={"shard_size": 8}))
        sent = server.requests
    want_retries = {sid: {0: 2, 3: 1, 6: 2}.get(op, 0) for sid, op in a.items()}
    failed = {sid for sid, op in a.items() if op == 6}
    em = statuses(res, "exact_match")
    assert sorted(em) == sorted(a), "a sample was lost or counted twice"
    for sid, s in em.items():
        if sid in failed:
            assert s["status"] == "error" and s["value"] is None and "HTTP 500" in s["reason"], s
        else:
            assert s["status"] == "scored" and s["value"] == 1.0, s
    assert nz(res.metrics["exact_match"].counts) == {"error": len(failed), "scored": 40 - len(failed)}
    assert res.metrics["exact_match"].mean == 1.0 and res.error_count == len(failed)
    gens = generations(tmp_path / "store")
    retries = {sid: g["metadata"]["retries"] for sid, g in gens.items()}
    assert retries == want_retries, "retry counts per sample"
    assert sent == 40 + sum(want_retries.values())
    assert res.tokens.source == "provider" and res.perf.latency_scope == "request"


def test_api_second_run_makes_zero_requests_and_a_changed_setting_makes_all_again(make_spec, tmp_path, rows):
    with OpenAIServer(ScriptedPolicy(solve), api_key=KEY) as server:
        model = api_model(server, tmp_path)
        one_shard = {"shard_size": 40}
        first = evaluate(make_spec("s1", model=model, execution=one_shard))
        assert server.requests == 40
        server.reset_counts()
        # a fresh result store (nothing to resume from): every answer comes from the API cache
        again = evaluate(make_spec("s2", model=model, execution=one_shard))
        assert server.requests == 0
        assert rows(again) == rows(first)
        changed = evaluate(make_spec("s3", model=model, execution=one_shard, generation={"max_new_tokens": 16}))
        assert server.requests == 40
    assert changed.generation_fingerprint != first.generation_fingerprint


def test_api_bad_input_is_error_or_unknown_with_a_reason_never_zero_and_counted(make_spec, arith, tmp_path):
    a = first_operand(arith)
    faults = [{"match": "What is 1 plus", "status": 401},
              {"match": "What is 2 plus", "status": "malformed"},
              {"match": "What is 4 plus", "status": 500}]

    def judge_reply(body):
        text = body["messages"][-1]["content"]
        return "hmm, hard to say" if "What is 5 plus" in text else "yes"

    with OpenAIServer(ScriptedPolicy(solve, faults=faults), api_key=KEY) as server, \
            OpenAIServer(ScriptedPolicy(judge_reply)) as judge_server:
        judge = {"type": "api", "base_url": judge_server.base_url, "model": "judge",
                 "cache_path": str(tmp_path / "judge-cache.sqlite")}
        res = evaluate(make_spec(model=api_model(server, tmp_path, max_retries=1), execution={"shard_size": 20},
                                 metrics=["exact_match", {"name": "factual_correctness", "params": {"judge": judge}}]))
    em, fc = statuses(res, "exact_match"), statuses(res, "factual_correctness")
    expect = {1: "HTTP 401", 2: "malformed response body", 4: "HTTP 500"}
    for sid, op in a.items():
        if op in expect:
            for s in (em[sid], fc[sid]):
                assert s["status"] == "error" and s["value"] is None and expect[op] in s["reason"], s
        elif op == 5:
            assert (
                fc[sid]["status"] == "unknown" and fc[sid]["value"] is None and "no yes/no verdict" in fc[sid]["reason"]
            )
            assert em[sid]["status"] == "scored"
        else:
            assert em[sid]["status"] == fc[sid]["status"] == "scored" and fc[sid]["value"] == 1.0
    n_err = sum(op in expect for op in a.values())
    n_unk = sum(op == 5 for op in a.values())
    summary = res.metrics["factual_correctness"]
    assert nz(summary.counts) == {"error": n_err, "scored": 40 - n_err - n_unk, "unknown": n_unk}
    assert summary.n == 40 - n_err - n_unk and summary.mean == 1.0 and summary.unscored == n_err + n_unk
    assert nz(res.metrics["exact_match"].counts) == {"error": n_err, "scored": 40 - n_err}
    assert res.error_count == n_err and summary.family == "judge"

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = {"type": "api", "base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "max_retries": 1, "backoff_s": 0.01,
            "cache_path": str(tmp_path / "c2.sqlite")}
    res2 = evaluate(make_spec("unreachable", model=down, dataset={"limit": 8}))
    assert nz(res2.metrics["exact_match"].counts) == {"error": 8} and res2.metrics["exact_match"].mean is None
    assert all("cannot reach" in s["reason"] for s in statuses(res2, "exact_match").values())


def test_the_api_key_never_reaches_results_table_or_fingerprint(make_spec, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    from auditkit_ray.core.fingerprint import canonical_json
    from auditkit_ray.pipeline.identity import generation_payload, run_payload

    monkeypatch.setenv("AK_TEST_PLANTED_KEY", KEY)
    faults = [{"match": "What is 2 plus", "status": 400, "message": f"Incorrect API key provided: {KEY}"}]
    with OpenAIServer(ScriptedPolicy(solve, faults=faults), api_key=KEY) as server, \
            OpenAIServer(ScriptedPolicy("yes"), api_key=KEY) as judge_server:
        model = api_model(server, tmp_path, api_key="${AK_TEST_PLANTED_KEY}")
        judge = {"type": "api", "base_url": judge_server.base_url, "model": "judge", "api_key": KEY,
                 "cache_path": str(tmp_path / "judge-cache.sqlite")}
        spec = make_spec(
            model=model,
            execution={"shard_size": 20},
            metrics=["exact_match", {"name": "factual_correctness", "params": {"judge": judge}}],
        )
        assert spec.model.api_key == KEY  # expanded from the environment
        res = evaluate(spec)
        assert all(h.get("authorization") == f"Bearer {KEY}" for h in server.headers + judge_server.headers)
    assert res.metrics["factual_correctness"].counts.get("scored", 0) > 0
    assert any("***" in (r["error"] or "") for r in samples_table(res).to_pylist()), "the echoed key is masked"
    store = tmp_path / "store"
    texts = [res.model_dump_json(), canonical_json(generation_payload(spec)), canonical_json(run_payload(spec)),
             res.fingerprint, res.generation_fingerprint]
    texts += [p.read_text() for p in store.rglob("*.json")]
    texts += [json.dumps(pq.read_table(p).to_pylist(), default=str) for p in store.rglob("*.parquet")]
    assert (store / "runs" / res.fingerprint / "result.json").is_file()
    assert len(texts) > 8
    leaks = [t[:80] for t in texts if KEY in t]
    assert not leaks, f"the planted key leaked into: {leaks}"
    for cache in ("api-cache.sqlite", "judge-cache.sqlite"):
        raw = b"".join(p.read_bytes() for p in tmp_path.glob(cache + "*"))
        assert raw and KEY.encode() not in raw
    db = Path(os.environ.get("AUDITKIT_RAY_DB", "/nonexistent"))
    if db.is_file():  # the ExperimentDB index of runs
        assert KEY.encode() not in b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def test_an_api_generation_actor_works_on_several_shards_at_once_within_max_concurrency(make_spec, tmp_path):
    # 2 samples per shard: one shard at a time could never have more than 2 requests in flight
    counter = InFlight(solve, 0.05)
    with OpenAIServer(ScriptedPolicy(counter), api_key=KEY) as server:
        res = evaluate(make_spec(model=api_model(server, tmp_path, max_concurrency=6, cache=False),
                                 execution={"shard_size": 2, "generation_shards_in_flight": 4}))
        sent = server.requests
    assert sent == 40 and res.metrics["exact_match"].mean == 1.0 and res.metrics["exact_match"].n == 40
    assert 2 < counter.max <= 6, (
        f"requests in flight at once: {counter.max} (want > one shard's 2, <= max_concurrency 6)"
    )
    # generation time is the actor's busy time, shared between overlapping shards: not 4x the wall time
    assert 0 < res.perf.generation_s <= res.perf.wall_s


def test_runs_sharing_an_api_actor_keep_their_own_settings_with_shards_in_flight(make_spec, arith, tmp_path):
    from auditkit_ray.pipeline.driver import evaluate_specs

    seen: list[tuple[int, int]] = []

    def reply(body):
        seen.append((body["max_tokens"], body["seed"]))
        return solve(body)

    with OpenAIServer(ScriptedPolicy(reply, latency_s=0.01), api_key=KEY) as server:
        model = api_model(server, tmp_path, max_concurrency=4, cache=False)
        ex = {"shard_size": 2, "generation_shards_in_flight": 4}
        a = make_spec("store-a", name="a", model=model, execution=ex, generation={"max_new_tokens": 5}, seed=1)
        b = make_spec("store-b", name="b", model=model, execution=ex, generation={"max_new_tokens": 9}, seed=2)
        ra, rb = evaluate_specs([a, b], progress=False)
    assert len(seen) == 80 and ra.metrics["exact_match"].mean == 1.0 and rb.metrics["exact_match"].mean == 1.0
    from auditkit_ray.backends.seeds import seed31 as _derived_seed

    ids = [f"q{i:03d}" for i in range(40)]
    want = {(5, _derived_seed(1, i, 0)) for i in ids} | {(9, _derived_seed(2, i, 0)) for i in ids}
    assert set(seen) == want, "a request went out with the other run's max_tokens or seed"
