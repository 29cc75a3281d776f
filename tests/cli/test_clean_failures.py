"""Failures that are clean (issue 51): a configuration mistake is one line naming where it is, exit 2; a write
error on stdout is one line with the gate's verdict kept; a result store that cannot be used fails before any work
(a path that is a file, an S3 endpoint that does not answer: in seconds, with a wait the user can set). The real
console script, in a subprocess."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from console import console

ECHO_DATA = "".join(json.dumps({"id": f"s{i}", "input": f"{i}", "target": f"{i}"}) + "\n" for i in range(4))


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def test_a_custom_metric_class_without_direction_is_one_line_naming_file_line_and_metric_exit_2(tmp_path):
    (tmp_path / "mymet.py").write_text(
        "from auditkit_ray import Metric, Score\n\n\n"
        "class NoDir(Metric):\n"
        "    name = 'nodir'\n\n"
        "    def score(self, sample, generation, context):\n"
        "        return Score.scored(self.name, 1.0)\n")
    (tmp_path / "d.jsonl").write_text(ECHO_DATA)
    (tmp_path / "run.yaml").write_text("name: cm\nmodel: {type: echo}\ndataset: {path: d.jsonl}\n"
                                       "metrics:\n  - exact_match\n  - mymet:NoDir\nstore: {path: results}\n")
    for command in ("validate", "run"):
        r = console(command, "run.yaml", cwd=tmp_path, timeout=120)
        lines = _lines(r.stderr)
        assert r.returncode == 2 and len(lines) == 1, (command, r.returncode, r.stderr)
        assert lines[0].startswith("error: run.yaml:6: metrics[1]: metric 'mymet:NoDir'"), lines
        assert "mymet.py:4" in lines[0] and "direction" in lines[0], lines
    assert not (tmp_path / "results").exists()


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("two-runs")
    (d / "d.jsonl").write_text(ECHO_DATA)
    dirs = []
    for name, field in (("base", "prompt"), ("cand", "target")):
        (d / f"{name}.json").write_text(json.dumps({
            "name": name, "model": {"type": "echo", "field": field}, "dataset": {"path": "d.jsonl"},
            "metrics": ["exact_match"], "store": {"path": "store"}, "tracking": {"index": False}}))
        r = console("run", f"{name}.json", "--json", "--quiet", cwd=d, timeout=300)
        assert r.returncode == 0, r.stderr
        dirs.append(Path(json.loads(r.stdout)["samples_path"]).parent)
    return dirs[0], dirs[1]


@pytest.mark.parametrize("gate, verdict", [("exact_match=0.5", 0), ("exact_match=1.5", 1)], ids=["passes", "fails"])
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_write_error_on_stdout_is_one_line_and_the_gate_s_verdict_stands(two_runs, tmp_path, gate, verdict,
                                                                             as_json):
    base, cand = two_runs
    args = ["compare", base, cand, "--fail-under", gate] + (["--json"] if as_json else [])
    ok = console(*args, cwd=tmp_path, timeout=120)
    assert ok.returncode == verdict, ok.stderr  # the verdict where stdout can be written
    full = console(*args, cwd=tmp_path, timeout=120, shell_tail="> /dev/full")
    lines = _lines(full.stderr)
    written = [ln for ln in lines if ln.startswith("error: cannot write the output to stdout")]
    assert len(written) == 1 and "No space left on device" in written[0], full.stderr
    if verdict:  # the failed gate is still named, and still exits 1
        assert full.returncode == 1 and len(lines) == 2 and "exact_match" in lines[0], full.stderr
    else:  # the output is lost: not a success
        assert full.returncode == 2 and lines == written, full.stderr


def test_a_store_path_that_is_a_file_fails_before_any_work(tmp_path):
    # an agent whose module says when a generation actor loads it: nothing may have loaded when the store fails
    (tmp_path / "marked_agent.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('LOADED').write_text('x')\n\n\n"
        "def step(payload):\n    return {'output': 'x', 'done': True}\n")
    (tmp_path / "d.jsonl").write_text(ECHO_DATA)
    (tmp_path / "taken").write_text("a file where the store should be\n")
    (tmp_path / "run.json").write_text(json.dumps({
        "name": "f", "model": {"type": "agent", "callable": "marked_agent:step"}, "dataset": {"path": "d.jsonl"},
        "metrics": ["exact_match"], "store": {"path": "taken"}}))
    for store in ("taken", "taken/sub"):
        r = console("run", "run.json", "--store", store, cwd=tmp_path, timeout=120)
        lines = _lines(r.stderr)
        assert r.returncode == 2 and len(lines) == 1, r.stderr
        assert "is a file, not a directory" in lines[0] and "taken" in lines[0], lines
        assert not (tmp_path / "LOADED").exists(), "the model was loaded before the store was checked"
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"name": "s", "base": json.loads((tmp_path / "run.json").read_text()),
                                 "runs": [{"name": "a"}, {"name": "b", "seed": 1}]}))
    r = console("sweep", sweep, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "is a file, not a directory" in r.stderr and len(_lines(r.stderr)) == 1, r.stderr
    assert not (tmp_path / "LOADED").exists()


@pytest.fixture
def silent_endpoint():
    """A TCP port that accepts connections (the kernel's backlog) and never answers, as a wrong endpoint can."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    yield f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()


def _closed_port() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_an_s3_store_at_a_wrong_endpoint_fails_in_seconds_naming_the_endpoint_and_the_setting(tmp_path, kind,
                                                                                               silent_endpoint):
    endpoint = _closed_port() if kind == "refused" else silent_endpoint
    (tmp_path / "d.jsonl").write_text(ECHO_DATA)
    (tmp_path / "run.json").write_text(json.dumps({
        "name": "w", "model": {"type": "echo"}, "dataset": {"path": "d.jsonl"}, "metrics": ["exact_match"],
        "store": {"path": "s3://evals/night", "endpoint_url": endpoint, "connect_timeout_s": 1, "retries": 0}}))
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    t0 = time.monotonic()
    r = console("run", "run.json", cwd=tmp_path, env=env, timeout=120)
    took = time.monotonic() - t0
    lines = _lines(r.stderr)
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert endpoint in lines[0] and "store.connect_timeout_s is 1s" in lines[0], lines
    # the wait is the one set (a connection, then twice it for the answer), not the minute of retries a store
    # that has answered gets during an outage; bounded loosely for a loaded host
    assert took < 30, (took, lines)


def test_a_cluster_address_where_nothing_listens_is_one_line_naming_it_not_a_wait_of_many_minutes(tmp_path):
    # Ray itself tries 20 times, up to a minute each; the console's timeout below is the bound that fails a hang
    port = _closed_port().rsplit(":", 1)[1]
    (tmp_path / "d.jsonl").write_text(ECHO_DATA)
    (tmp_path / "run.json").write_text(json.dumps({
        "name": "a", "model": {"type": "echo"}, "dataset": {"path": "d.jsonl"}, "metrics": ["exact_match"],
        "store": {"path": "results"}}))
    for argv in (("run", "run.json", "--address", f"127.0.0.1:{port}"), ("status", "--address", f"127.0.0.1:{port}")):
        r = console(*argv, cwd=tmp_path, timeout=120)
        lines = _lines(r.stderr)
        assert r.returncode == 2 and len(lines) == 1, (argv, r.returncode, r.stderr)
        assert lines[0].startswith(f"error: no Ray cluster answers at 127.0.0.1:{port} "), lines
        assert f"ray start --head --port {port}" in lines[0] and "RAY_ADDRESS" in lines[0], lines
    # the same address from the environment, and a host that has no address at all
    r = console("run", "run.json", cwd=tmp_path, env={"RAY_ADDRESS": "no-such-host.invalid:6379"}, timeout=120)
    lines = _lines(r.stderr)
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith("error: no Ray cluster at no-such-host.invalid:6379: the host"), lines
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("address, expected", [
    ("127.0.0.1:6379", ("127.0.0.1", 6379)), ("ray://head.svc:10001", ("head.svc", 10001)),
    ("[::1]:6379", ("::1", 6379)), ("auto", None), ("local", None), ("head:port", None)])
def test_the_address_a_run_checks_before_joining_is_host_and_port_and_ray_resolves_the_others(address, expected):
    from auditkit_ray.cluster.connect import host_port

    assert host_port(address) == expected
