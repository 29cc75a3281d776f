#!/usr/bin/env python
"""Workload 8: merging a run from an S3 store (reads ahead against one at a time).

    python benchmarks/bench_store_reads.py [--smoke | --quick | --full] [--latency-ms 0,20]

A ``simulated`` run is written to a real S3-compatible server (moto in server
mode on 127.0.0.1, the one the tests use) through the pipeline. Then the
driver's merge of that run (``pipeline.merge.merge``: read every shard,
summarise every score) runs with the store reading one shard at a time
(``prefetch = 1``, the package before this change) and with its default read
ahead (``S3Store.prefetch``, 8 reads in flight), alternating, three times
each; the figure is each one's median and the ratio. moto on the same
machine answers a GET in a few milliseconds, where a real endpoint in
another zone or region takes tens: ``--latency-ms`` adds that much to every
read, on both sides (a sleep in the store's ``read_bytes`` before the real
GET), to show the figure for a far endpoint. Both sides' summaries must be
equal (checked).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    Recorder,
    arith_records,
    call_quietly,
    note,
    parser,
    print_machine,
    rmtree,
    run_spec,
    start_ray,
    stop_ray,
    with_tmpdir,
    write_jsonl,
)

#: mode -> (samples, shard size)
MODES = {"smoke": (200, 10), "quick": (20_000, 100), "full": (100_000, 64)}
REPS = 3


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument(
        "--latency-ms", default="0,20", help="added to every read, one pair of measurements each (default %(default)s)"
    )
    a = ap.parse_args(argv)
    n, shard = MODES[a.mode]
    latencies = [float(x) for x in a.latency_ms.split(",") if x.strip()]
    print_machine()
    rec = Recorder("store_reads", a.mode)
    try:
        import boto3
    except ImportError:
        why = "boto3 is not installed: pip install -e '.[s3]'"
        for name in ("store_reads.latency0ms.merge.prefetch1", "store_reads.latency20ms.merge.prefetch8",
                     "store_reads.latency20ms.ratio", "store_reads.summaries_match"):
            rec.emit(name, "skipped", f"({why})")
        rec.save(a.json)
        return 0
    import os

    from auditkit_ray.config import run_spec_from_dict
    from auditkit_ray.pipeline.merge import merge
    from auditkit_ray.pipeline.plan import build_plan
    from auditkit_ray.store.s3 import S3Store

    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):  # moto takes any credentials; never real ones here
        os.environ[k] = "bench-moto"
    work = with_tmpdir("bench-store-")
    from auditkit_ray.testing.s3 import start_moto_server

    log = open(work / "moto.log", "w")
    proc, url, _ = start_moto_server(log)
    try:
        boto3.client("s3", endpoint_url=url, region_name="us-east-1").create_bucket(Bucket="bench")
        data = write_jsonl(work / "data.jsonl", arith_records(n))
        spec = {
            "name": "store-reads",
            "model": {"type": "simulated", "fixed_cost_s": 0.0, "per_token_s": 0.0, "output": "target"},
            "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
            "prompt": {"template": "{{ question }} Answer:"},
            "metrics": ["exact_match", "token_f1"],
            "execution": {"shard_size": shard, "scoring_actors": 2},
            "store": {"path": "s3://bench/results", "endpoint_url": url, "region": "us-east-1"},
            "tracking": {"index": False},
        }
        rec.setting(samples=n, shard_size=shard, shards=-(-n // shard), reps=REPS, latency_ms=latencies,
                    store="moto_server on 127.0.0.1", metrics=spec["metrics"])
        note(f"writing {n} samples in shards of {shard} to moto ...")
        start_ray()
        try:
            call_quietly(lambda: run_spec(spec))
        finally:
            stop_ray()
        rs = run_spec_from_dict(spec)

        class Slow(S3Store):
            delay = 0.0

            def read_bytes(self, rel: str) -> bytes:
                if self.delay:
                    time.sleep(self.delay)
                return super().read_bytes(rel)

        default = S3Store.prefetch
        for lat in latencies:
            times: dict[int, list[float]] = {1: [], default: []}
            means: dict[int, Any] = {}
            for _ in range(REPS):
                for pf in (1, default):
                    st = Slow(spec["store"]["path"], endpoint_url=url, region="us-east-1")
                    st.delay, st.prefetch = lat / 1000, pf
                    plan = build_plan(rs, st)
                    t0 = time.perf_counter()
                    res = merge(plan, st, wall_s=1.0, generated=0, generation_s=0.0, new_tokens=0)
                    times[pf].append(time.perf_counter() - t0)
                    means[pf] = {k: v.mean for k, v in res.metrics.items()}
            if means[1] != means[default]:
                raise SystemExit(f"the two merges disagree: {means}")
            one, ahead = statistics.median(times[1]), statistics.median(times[default])
            tag = f"store_reads.latency{lat:g}ms"
            rec.emit(f"{tag}.merge.prefetch1", one, "s (one read at a time, median)")
            rec.emit(f"{tag}.merge.prefetch{default}", ahead, f"s ({default} reads ahead, median)")
            rec.emit(f"{tag}.ratio", ahead / one, "x (read ahead / one at a time)")
            note(f"added latency {lat:g} ms: one at a time {one:.2f} s, {default} ahead {ahead:.2f} s")
        rec.emit("store_reads.summaries_match", True)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
        rmtree(work)
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
