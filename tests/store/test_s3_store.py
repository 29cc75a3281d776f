"""The result store on a real S3 endpoint (moto in server mode on 127.0.0.1)."""

import signal
import subprocess
import sys
import time

import pytest

from auditkit_ray import RunResult
from auditkit_ray.api import evaluate
from auditkit_ray.store.s3 import S3Store

pytestmark = pytest.mark.usefixtures("ray_cluster", "library_warnings_on_stderr")


def test_atomic_write_never_overwrites_and_lists(s3_server, s3_bucket):
    st = S3Store(f"s3://{s3_bucket}/root", endpoint_url=s3_server["url"])
    assert st.write_atomic("a/x.bin", b"one") is True
    assert st.write_atomic("a/x.bin", b"two") is False
    assert st.read_bytes("a/x.bin") == b"one"
    st.replace("a/y.json", b"{}")
    assert st.list("a") == ["x.bin", "y.json"] and st.list_dirs("") == ["a"]
    assert st.exists("a/x.bin") and not st.exists("a/z")


def test_s3_run_resumed_by_a_second_process_reads_back_equal(
    make_spec, tmp_path, s3_server, s3_bucket, ray_cluster, rows, numbers
):
    import yaml

    slow = {"type": "simulated", "fixed_cost_s": 0.25, "per_token_s": 0.0, "output": "prompt"}
    store = {"path": f"s3://{s3_bucket}/results", "endpoint_url": s3_server["url"]}
    spec = make_spec(model=slow, execution={"shard_size": 2}, store=store)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True)))
    cmd = [
        sys.executable,
        "-m",
        "auditkit_ray.cli",
        "run",
        str(cfg),
        "--address",
        ray_cluster.get_runtime_context().gcs_address,
        "--quiet",
    ]
    s3 = S3Store(store["path"], endpoint_url=s3_server["url"])
    from auditkit_ray.pipeline.identity import run_fingerprint

    shards = f"runs/{run_fingerprint(spec)}/s2"
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and len(s3.list(shards)) < 5:
        assert first.poll() is None, first.stderr.read().decode()[-2000:]
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    done_before = len(s3.list(shards))
    assert 5 <= done_before < 20

    second = subprocess.run(cmd[:-1] + ["--json"], capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    resumed = RunResult.model_validate_json(second.stdout)
    assert resumed.samples_path.startswith("s3://")
    assert resumed.perf.generated <= 40 - 2 * done_before + 4
    stored = RunResult.model_validate_json(s3.read_bytes(f"runs/{resumed.fingerprint}/result.json"))
    assert numbers(stored) == numbers(resumed)

    local = evaluate(make_spec("local", model=slow, execution={"shard_size": 2}))
    assert numbers(resumed) == numbers(local)
    assert rows(resumed) == rows(local)  # per-sample table read back from S3


def test_store_unreachable_for_a_while_then_back_gives_the_same_result(make_spec, s3_server, s3_bucket, rows, numbers):
    import threading

    from tcp_proxy import Proxy

    proxy = Proxy(s3_server["port"])
    proxy.start()
    store = {"path": f"s3://{s3_bucket}/flaky", "endpoint_url": f"http://127.0.0.1:{proxy.port}"}
    slow = {"type": "simulated", "fixed_cost_s": 0.2, "per_token_s": 0.0, "output": "prompt"}
    spec = make_spec(model=slow, execution={"shard_size": 2}, store=store)
    direct = S3Store(f"s3://{s3_bucket}/flaky", endpoint_url=s3_server["url"])
    from auditkit_ray.pipeline.identity import run_fingerprint

    shards = f"runs/{run_fingerprint(spec)}/s2"
    outage = {}

    def cut():
        deadline = time.time() + 60
        while time.time() < deadline and len(direct.list(shards)) < 4:
            time.sleep(0.05)
        proxy.stop()
        outage["at"] = len(direct.list(shards))
        time.sleep(6)
        outage["during"] = len(direct.list(shards)) - outage["at"]
        proxy.start()

    t = threading.Thread(target=cut)
    t.start()
    res = evaluate(spec)
    t.join()
    assert 4 <= outage["at"] < 20 and outage["during"] == 0, outage  # the store really was unreachable mid-run
    ref = evaluate(make_spec("ref", model=slow, execution={"shard_size": 2}))
    assert numbers(res) == numbers(ref) and rows(res) == rows(ref)
    proxy.stop()


def test_merge_reads_s3_shards_ahead_with_at_most_prefetch_in_flight(make_spec, s3_server, s3_bucket, numbers):
    import threading

    from auditkit_ray.pipeline.merge import merge
    from auditkit_ray.pipeline.plan import build_plan

    store = {"path": f"s3://{s3_bucket}/prefetch", "endpoint_url": s3_server["url"]}
    spec = make_spec(execution={"shard_size": 2}, store=store)
    res = evaluate(spec)  # 20 shards in the bucket

    class Counting(S3Store):
        """The real store; its reads are counted (and made as slow as a far endpoint)."""

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.lock, self.now, self.max, self.reads = threading.Lock(), 0, 0, []

        def read_bytes(self, rel):
            with self.lock:
                self.now += 1
                self.max = max(self.max, self.now)
            try:
                time.sleep(0.05)
                return super().read_bytes(rel)
            finally:
                with self.lock:
                    self.now -= 1
                    self.reads.append(rel)

    st = Counting(store["path"], endpoint_url=s3_server["url"])
    plan = build_plan(spec, st)
    merged = merge(plan, st, wall_s=1.0, generated=0, generation_s=0.0, new_tokens=0)
    shard_reads = [r for r in st.reads if "/s2/shard-" in r]
    assert len(shard_reads) == 20, "every shard read once"
    assert 1 < st.max <= st.prefetch, f"{st.max} reads in flight at once (prefetch {st.prefetch})"
    assert numbers(merged) == numbers(res)
