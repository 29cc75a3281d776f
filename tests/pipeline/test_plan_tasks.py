"""How the plan is built: a large JSON Lines or Parquet dataset is read,
validated and sharded in Ray tasks (``execution.plan_tasks``), and runs that
read one dataset the same way share one reading. The plan, and any error,
must be the ones the driver builds alone, and nothing may run before the
whole dataset passed."""

import json
import os
from pathlib import Path

import pytest

from auditkit_ray.actors.shard import unpack
from auditkit_ray.errors import DataError
from auditkit_ray.pipeline.plan import PLAN_IN_TASKS_BYTES, build_plan, plan_task_count
from auditkit_ray.store.base import open_store


def records(n: int, *, ids: bool = True) -> list[dict]:
    out = []
    for i in range(n):
        a, b = i % 7, (i * 3) % 11
        rec = {"question": f"What is {a} plus {b}?", "answer": str(a + b), "topic": ["sum", "add"][i % 2]}
        if ids:
            rec = {"id": f"q{i:04d}", **rec}
        out.append(rec)
    return out


def write_lines(path: Path, lines: list[str]) -> Path:
    """Lines as given, with blank lines and a CRLF ending here and there
    (the reader skips the former and accepts the latter)."""
    with open(path, "w", newline="") as f:
        for k, line in enumerate(lines):
            f.write(line + ("\r\n" if k % 13 == 5 else "\n"))
            if k % 17 == 3:
                f.write("\n   \n")
    return path


def jsonl(path: Path, recs: list[dict]) -> Path:
    return write_lines(path, [json.dumps(r) for r in recs])


def contents(plan) -> dict:
    """Each pending shard's payload and samples, fetched from the object store where the tasks put them."""
    import ray

    def row(r):
        return ray.get(r["ref"]) if "ref" in r else r

    return {i: (unpack(row(r)["payload"]), [s.model_dump() for s in unpack(row(r)["samples"])])
            for i, r in sorted(plan.shard_payloads.items())}


def both(spec) -> tuple:
    """The plan the driver builds alone, and the one the tasks build."""
    alone = build_plan(spec.model_copy(update={"execution": spec.execution.model_copy(update={"plan_tasks": 0})}),
                       open_store(spec.store))
    tasks = build_plan(spec, open_store(spec.store), in_tasks=True)
    return alone, tasks


def error_of(spec, in_tasks: bool) -> str:
    with pytest.raises(DataError) as info:
        build_plan(spec, open_store(spec.store), in_tasks=in_tasks)
    return str(info.value)


def test_a_plan_built_in_ray_tasks_is_the_plan_the_driver_builds_alone(ray_cluster, make_spec, tmp_path):
    data = jsonl(tmp_path / "d.jsonl", records(203))
    spec = make_spec(data=data, repeats=2, execution={"shard_size": 8, "plan_tasks": 3})
    alone, tasks = both(spec)
    assert (tasks.planned_in_tasks, alone.planned_in_tasks) == (3, 0)
    assert (tasks.n_samples, tasks.n_shards) == (alone.n_samples, alone.n_shards) == (203, 26)
    assert tasks.shard_payloads_built and tasks.layout == alone.layout
    assert contents(tasks) == contents(alone)
    assert len(contents(tasks)[25][1]) == 2 * 3  # the last shard: 3 samples, 2 repeats each

    # a resumed run: shards already stored are checked but not rebuilt, in either plan
    store = open_store(spec.store)
    for i in (0, 9, 25):
        store.replace(alone.layout.shard(i), b"stored")
    alone, tasks = both(spec)
    assert tasks.planned_in_tasks == 3 and tasks.done == alone.done == {0, 9, 25}
    assert sorted(tasks.shard_payloads) == sorted(alone.shard_payloads) == sorted(set(range(26)) - {0, 9, 25})
    assert contents(tasks) == contents(alone)


def test_the_driver_reads_the_first_part_itself_while_ray_tasks_read_the_others(ray_cluster, make_spec, tmp_path):
    data = jsonl(tmp_path / "d.jsonl", records(90))
    spec = make_spec(data=data, execution={"shard_size": 10, "plan_tasks": 3})
    alone, tasks = both(spec)
    assert tasks.planned_in_tasks == 3 and len(tasks.plan_readers) == 3
    first, *others = tasks.plan_readers
    assert first == os.getpid()  # no task (and no worker process to start) for the first part
    assert os.getpid() not in others and len(set(others)) == 2  # each other part in a worker of its own
    assert contents(tasks) == contents(alone)


def test_a_bad_sample_found_in_a_plan_task_fails_with_the_drivers_own_error(ray_cluster, make_spec, tmp_path):
    recs = records(200)
    lines = [json.dumps(r) for r in recs]
    cases = {}
    # a line that is not JSON, in the last part
    cases["json"] = lines[:170] + ["{not json"] + lines[171:]
    # the same in the first part, which the driver reads itself
    cases["json_first"] = lines[:5] + ["{not json"] + lines[6:]
    # a duplicate id in the last part of a sample in the first part
    cases["duplicate"] = lines[:180] + [json.dumps({**recs[180], "id": recs[2]["id"]})] + lines[181:]
    # a sample the template cannot fill early, and a broken line later: every line is read before any
    # prompt is built, so the broken line is what the driver reports
    cases["order"] = (
        lines[:20] + [json.dumps({"id": "q9999", "answer": "1"})] + lines[21:170] + ["[1, 2]"] + lines[171:]
    )
    # only the template's error
    cases["template"] = lines[:120] + [json.dumps({"id": "q9999", "answer": "1"})] + lines[121:]
    # a record whose structured field has the wrong shape
    cases["shape"] = lines[:90] + [json.dumps({**recs[90], "retrieved_contexts": "not a list"})] + lines[91:]
    seen = {}
    for name, case in cases.items():
        data = write_lines(tmp_path / f"{name}.jsonl", case)
        spec = make_spec(f"store-{name}", data=data, execution={"shard_size": 10, "plan_tasks": 3})
        seen[name] = error_of(spec, True)
        assert seen[name] == error_of(spec, False), name
    assert "invalid JSON line" in seen["json"] and f"{tmp_path / 'json.jsonl'}:" in seen["json"]
    assert (
        "invalid JSON line" in seen["json_first"] and f"{tmp_path / 'json_first.jsonl'}:8:" in seen["json_first"]
    )  # after the blank lines write_lines adds
    assert "duplicate sample id 'q0002'" in seen["duplicate"] and "first at" in seen["duplicate"]
    assert "each line must be a JSON object" in seen["order"]
    assert "'q9999'" in seen["template"] and "question" in seen["template"]
    assert "cannot be read" in seen["shape"]


def test_a_run_whose_plan_task_finds_a_bad_line_writes_nothing(ray_cluster, make_spec, tmp_path):
    from auditkit_ray.api import evaluate

    lines = [json.dumps(r) for r in records(120)]
    data = write_lines(tmp_path / "bad.jsonl", lines[:110] + ["{oops"] + lines[111:])
    spec = make_spec(data=data, execution={"shard_size": 10, "plan_tasks": 2})
    with pytest.raises(DataError, match="invalid JSON line"):
        evaluate(spec)
    written = [p for p in (tmp_path / "store").rglob("*") if p.is_file()] if (tmp_path / "store").exists() else []
    assert written == []


def test_identical_records_without_ids_are_numbered_as_the_driver_numbers_them(ray_cluster, make_spec, tmp_path):
    # no ids, all different: the tasks derive the same ids from the contents
    data = jsonl(tmp_path / "distinct.jsonl", [{**r, "n": i} for i, r in enumerate(records(60, ids=False))])
    spec = make_spec("distinct", data=data, execution={"shard_size": 8, "plan_tasks": 2})
    alone, tasks = both(spec)
    assert tasks.planned_in_tasks == 2 and contents(tasks) == contents(alone)

    # no ids, and records 0-6 come back in the other part: the reader numbers the copies (id~2) in file order,
    # so the driver builds this plan itself
    recs = records(60, ids=False)
    data = jsonl(tmp_path / "copies.jsonl", recs[:50] + recs[:10])
    spec = make_spec("copies", data=data, execution={"shard_size": 8, "plan_tasks": 2})
    alone, tasks = both(spec)
    assert tasks.planned_in_tasks == 0 and contents(tasks) == contents(alone)
    ids = [s["id"] for _, samples in contents(tasks).values() for s in samples]
    assert len(set(ids)) == 60 and sum(i.endswith("~2") for i in ids) >= 10


def test_a_run_planned_in_tasks_scores_what_a_run_planned_on_the_driver_scores(
    ray_cluster, make_spec, tmp_path, rows, numbers
):
    from auditkit_ray.api import evaluate

    data = jsonl(tmp_path / "d.jsonl", records(90))
    one = evaluate(make_spec("alone", data=data, execution={"shard_size": 8, "plan_tasks": 0}))
    two = evaluate(make_spec("tasks", data=data, execution={"shard_size": 8, "plan_tasks": 2}))
    assert one.fingerprint == two.fingerprint  # plan_tasks is how, not what: not in the fingerprint
    assert numbers(two) == numbers(one) and rows(two) == rows(one)
    assert two.perf.samples == 90


def parquet_dir(path: Path, recs: list[dict], cuts: list[int]) -> Path:
    """The records as Parquet files cut at ``cuts`` (the reader takes a directory's files by name)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir()
    for k, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(recs)])):
        pq.write_table(pa.Table.from_pylist(recs[a:b]), path / f"part-{k:02d}.parquet")
    return path


def test_a_parquet_dataset_planned_in_ray_tasks_is_the_plan_the_driver_builds_alone(ray_cluster, make_spec, tmp_path):
    recs = records(113)
    data = parquet_dir(tmp_path / "pq", recs, [37, 87])  # 37, 50 and 26 rows: parts cut across the files
    spec = make_spec(data=data, execution={"shard_size": 10, "plan_tasks": 3})
    alone, tasks = both(spec)
    assert tasks.planned_in_tasks == 3 and (tasks.n_samples, tasks.n_shards) == (113, 12)
    assert contents(tasks) == contents(alone)

    # errors name the file and row, as the driver's reader does
    dup = parquet_dir(tmp_path / "dup", [*recs[:100], {**recs[100], "id": recs[5]["id"]}, *recs[101:]], [37, 87])
    seen = error_of(make_spec("s-dup", data=dup, execution={"shard_size": 10, "plan_tasks": 3}), True)
    assert seen == error_of(make_spec("s-dup", data=dup, execution={"shard_size": 10, "plan_tasks": 0}), False)
    assert "part-02.parquet row 13: duplicate sample id 'q0005' (first at" in seen and "part-00.parquet row 5" in seen
    odd = [{**r, "retrieved_contexts": "not a list" if i == 60 else None} for i, r in enumerate(recs)]
    bad = parquet_dir(tmp_path / "bad", odd, [37, 87])
    seen = error_of(make_spec("s-bad", data=bad, execution={"shard_size": 10, "plan_tasks": 3}), True)
    assert seen == error_of(make_spec("s-bad", data=bad, execution={"shard_size": 10, "plan_tasks": 0}), False)
    assert "part-01.parquet row 23: sample 'q0060' cannot be read" in seen


def test_only_a_large_json_lines_or_parquet_dataset_of_independent_samples_is_planned_in_tasks_by_default(
    make_spec, tmp_path
):
    small = jsonl(tmp_path / "small.jsonl", records(10))
    assert plan_task_count(make_spec(data=small)) == 0
    big = tmp_path / "big.jsonl"
    with open(big, "w") as f:  # sparse: as large as the threshold without writing it
        f.write(json.dumps(records(1)[0]) + "\n")
        f.truncate(PLAN_IN_TASKS_BYTES)
    assert plan_task_count(make_spec(data=big)) == -1  # one per CPU of the cluster
    assert plan_task_count(make_spec(data=big, execution={"plan_tasks": 1})) == 0
    assert plan_task_count(make_spec(data=small, execution={"plan_tasks": 4})) == 4
    # samples that depend on others, or on their position, stay on the driver
    assert plan_task_count(make_spec(data=big, dataset={"limit": 5})) == 0
    assert plan_task_count(make_spec(data=big, prompt={"template": "{{ question }}", "few_shot": {"n": 2}})) == 0
    pq_dir = parquet_dir(tmp_path / "pq", records(10), [5])
    assert plan_task_count(make_spec(data=pq_dir)) == 0  # small
    assert plan_task_count(make_spec(data=pq_dir, execution={"plan_tasks": 4})) == 4
    csv = tmp_path / "d.csv"
    csv.write_text("id,question,answer\nq1,What is 1 plus 1?,2\n")
    assert plan_task_count(make_spec(data=csv, execution={"plan_tasks": 4})) == 0


def test_runs_that_read_one_dataset_the_same_way_read_it_once_and_share_its_rows(make_spec, tmp_path, monkeypatch):
    from auditkit_ray.pipeline import plan as plan_module
    from auditkit_ray.pipeline.plan import build_plans

    reads = []
    real = plan_module.load_samples
    monkeypatch.setattr(plan_module, "load_samples", lambda d, *a: reads.append(d.path) or real(d, *a))
    data = jsonl(tmp_path / "d.jsonl", records(50))
    simulated = {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "target"}
    a = make_spec("s", data=data, execution={"shard_size": 8})
    b = make_spec(
        "s", data=data, execution={"shard_size": 8}, model={**simulated, "per_token_s": 0.001}
    )  # another checkpoint
    c = make_spec(
        "s", data=data, execution={"shard_size": 8}, prompt={"template": "Q: {{ question }}"}
    )  # another prompt
    pa, pb, pc = build_plans([a, b, c])
    assert len(reads) == 2  # a and b share one reading; c reads its own
    assert pa.layout.run_fp != pb.layout.run_fp and pa.row(3)["run"] != pb.row(3)["run"]
    assert all(pa.shard_payloads[i] is pb.shard_payloads[i] for i in range(7))  # one copy of the rows, not two
    assert contents(pa) == contents(build_plan(a, open_store(a.store))) and contents(pc) != contents(pa)

    # a's shard 2 is stored: a skips it, b (another run) still gets its row
    store = open_store(a.store)
    store.replace(pa.layout.shard(2), b"stored")
    pa, pb = build_plans([a, b])
    assert pa.done == {2} and 2 not in pa.shard_payloads and pb.done == set()
    assert contents(pb) == contents(build_plan(b, open_store(b.store)))


def test_a_part_that_fails_outside_its_checks_is_a_run_error_naming_the_file(
    ray_cluster, make_spec, tmp_path, monkeypatch
):
    from auditkit_ray.errors import RunError
    from auditkit_ray.pipeline import plan_tasks

    real, driver = plan_tasks.plan_part, os.getpid()

    def part(*args, **kw):  # a bug in the driver's own part (the tasks' parts are read as always)
        if os.getpid() == driver:
            raise RuntimeError("the driver's part broke")
        return real(*args, **kw)

    monkeypatch.setattr(plan_tasks, "plan_part", part)
    data = jsonl(tmp_path / "d.jsonl", records(60))
    spec = make_spec(data=data, execution={"shard_size": 10, "plan_tasks": 2})
    with pytest.raises(
        RunError, match=f"planning {tmp_path / 'd.jsonl'} in parts failed: RuntimeError: the driver's part broke"
    ):
        build_plan(spec, open_store(spec.store), in_tasks=True)
