#!/usr/bin/env python
"""Workload 7: the ``api`` backend against a local OpenAI-compatible server.

    python benchmarks/bench_api.py [--smoke | --quick | --full] [--requests N] [--shard-sizes default,64]
    python benchmarks/bench_api.py --realistic      # 300 ms +- 50 ms latency, 256 in flight, 10,000 requests
    python benchmarks/bench_api.py --realistic --warm   # the same on a resident engine (its second run)

The server is the package's test server (``auditkit_ray.testing.OpenAIServer``,
a ``ThreadingHTTPServer``: one thread per connection) with a scripted policy
that answers ``What is A plus B?`` correctly after an injected latency of
20 ms per request. It runs in its own process (so that neither client shares
its interpreter lock) and reports, per phase, the requests it received, the
times of the first and last one and its own CPU time. The test server's
sockets differ from ``http.server``'s defaults (``--server-defaults`` puts
them back; see ``BACKLOG``): a listen backlog of 1024 instead of 5, and
TCP_NODELAY, without which every response waits ~40 ms for a delayed ACK.

Two clients, one after the other, in the same run, each sending N
``POST /v1/chat/completions`` with the body the ``api`` backend sends
(model, messages, max_tokens, temperature, seed), 64 in flight:

1. ``client``: a minimal asyncio client in this process (stdlib only: 64
   keep-alive HTTP/1.1 connections over ``asyncio.open_connection``, each
   sending its next request when the previous answer is read, parsed and
   checked).
   It runs twice, before and after the auditkit runs; ratios use the mean;
2. ``auditkit``: ``evaluate()`` of N samples through the ``api`` backend
   (``max_concurrency`` 64, one generation actor, one scoring actor, metric
   exact_match, the response cache on in a fresh file, other fields
   default), once per shard size: ``default`` (the package's default for
   the api backend, 256 samples, with 4 shards in flight per generation
   actor: the headline and the goal's figure) and 64 (one wave of 64
   requests per shard). Ray is
   started and warmed up by one tiny run first (both reported separately).

Figures: requests/s of each; auditkit's end to end (``evaluate()`` wall,
Ray start-up excluded), over its generation window (the server's first to
last request) and per ``perf.generation_s``; the ratios; and the server's
CPU per request and busy fraction (near 1.0 the test server, not the
clients, would be the limit). Every auditkit sample must be answered and
scored correctly, and the server must have received exactly N requests from
each client run and at least N from each auditkit run (retries are reported).
Goal: auditkit >= 0.8x the client (end to end, Ray start-up excluded).

``--realistic`` is the setting of a hosted model: 300 ms of latency with
+-50 ms of jitter (drawn per request from its body, so both clients see the
same), 256 requests in flight, 10,000 requests, the default shard size only;
its goal is >= 0.9x the client. ``--latency-ms``, ``--jitter-ms`` and
``--concurrency`` set any other.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import multiprocessing as mp
import re
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
    timed,
    warm_up,
    with_tmpdir,
    write_jsonl,
)

#: mode -> requests per phase
REQUESTS = {"smoke": 300, "quick": 5_000, "full": 20_000}
CONCURRENCY = 64
LATENCY_S = 0.020
#: auditkit shard sizes, one run each; the first (``default``: the package's default for the api backend, 256)
#: is the headline and the goal's; 64 = one wave of requests per shard
SHARDS = ("default", 64)
#: Two socket settings of the test server (auditkit_ray.testing sets them; --server-defaults undoes them), because with
#: http.server's defaults the figures time TCP, not the clients: (1) socketserver's listen() backlog of 5
#: overflows when 64 connections open at once (the kernel drops SYNs; the client retries after 1 s, 3 s, ...);
#: (2) without TCP_NODELAY the response body, written after the headers in a second send(), waits for the
#: client's delayed ACK (~40 ms on Linux): 20 ms of injected latency become ~60 ms per request.
BACKLOG = 1024
MODEL = "bench-arith"
MAX_TOKENS = 8
_Q = re.compile(r"What is (\d+) plus (\d+)\?")


def solve(body: dict[str, Any]) -> str:
    m = _Q.search(body["messages"][-1]["content"])
    return str(int(m.group(1)) + int(m.group(2))) if m else "?"


def prompt_of(record: dict[str, Any]) -> str:
    return f"{record['question']} Answer:"


# ----------------------------------------------------------------------------- server (own process)
def _serve(conn: Any, latency_s: float, tuned: bool, jitter_s: float = 0.0) -> None:
    """The test server in a child process; answers 'stats', 'reset', 'stop' on ``conn``."""
    import hashlib
    import os

    from auditkit_ray.testing import OpenAIServer, ScriptedPolicy, openai_server

    if not tuned:  # only in this process: back to http.server's defaults (see BACKLOG)
        openai_server._Server.request_queue_size = 5
        openai_server._Handler.disable_nagle_algorithm = False

    def reply(body: dict[str, Any]) -> str:
        if jitter_s:  # +- jitter_s around latency_s, the same for a body whichever client sends it
            h = int.from_bytes(hashlib.sha256(body["messages"][-1]["content"].encode()).digest()[:4], "big")
            time.sleep(2 * jitter_s * (h / 2**32))
        return solve(body)

    server = OpenAIServer(ScriptedPolicy(reply, latency_s=latency_s - jitter_s))
    stamps: list[float] = []
    record = server._record

    def stamped(path: str, body: Any, headers: dict[str, str]) -> None:
        stamps.append(time.monotonic())
        record(path, body, headers)

    server._record = stamped  # type: ignore[method-assign]
    server.start()
    conn.send(server.base_url)
    cpu0 = os.times()
    while True:
        cmd = conn.recv()
        if cmd == "reset":
            server.reset_counts()
            stamps.clear()
            cpu0 = os.times()
            conn.send(True)
        elif cmd == "stats":
            cpu1 = os.times()
            with server._lock:
                conn.send({"requests": server.requests, "by_path": dict(server.by_path),
                           "first": stamps[0] if stamps else None, "last": stamps[-1] if stamps else None,
                           "cpu_s": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)})
        elif cmd == "stop":
            server.stop()
            conn.send(True)
            return


class Server:
    def __init__(self, latency_s: float, tuned: bool, jitter_s: float = 0.0) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, latency_s, tuned, jitter_s), daemon=True,
                                name="bench-openai-server")
        self.proc.start()
        self.base_url: str = self.conn.recv()

    def ask(self, cmd: str) -> Any:
        self.conn.send(cmd)
        return self.conn.recv()

    def stop(self) -> None:
        try:
            self.ask("stop")
        finally:
            self.proc.join(10)


# ----------------------------------------------------------------------------- the minimal asyncio client
async def _client(base_url: str, bodies: list[bytes], answers: list[str], concurrency: int) -> int:
    m = re.match(r"http://([^:/]+):(\d+)(/.*)$", base_url)
    assert m, base_url
    host, port, prefix = m.group(1), int(m.group(2)), m.group(3).rstrip("/")
    head = (f"POST {prefix}/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: ").encode()
    todo = iter(zip(bodies, answers))
    ok = 0

    async def worker() -> None:
        nonlocal ok
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for body, answer in todo:
                writer.write(head + str(len(body)).encode() + b"\r\n\r\n" + body)
                status = await reader.readline()
                length = 0
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v)
                data = json.loads(await reader.readexactly(length))
                if status.split()[1] != b"200" or data["choices"][0]["message"]["content"] != answer:
                    raise RuntimeError(f"bad answer: {status!r} {data!r}"[:300])
                ok += 1
        finally:
            writer.close()
            await writer.wait_closed()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ok


def client_bodies(records: list[dict[str, Any]]) -> list[bytes]:
    # the body the api backend sends for the same sample (seed: any int; the server ignores it)
    return [
        json.dumps(
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": prompt_of(r)}],
                "max_tokens": MAX_TOKENS,
                "temperature": 0.0,
                "seed": i,
            }
        ).encode()
        for i, r in enumerate(records)
    ]


def run_client(server: Server, records: list[dict[str, Any]], concurrency: int) -> tuple[float, dict[str, Any]]:
    bodies = client_bodies(records)
    server.ask("reset")
    c0, t0 = time.process_time(), time.perf_counter()
    ok = asyncio.run(_client(server.base_url, bodies, [r["answer"] for r in records], concurrency))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    st = server.ask("stats")
    st["client_cpu_s"] = cpu
    if ok != len(records) or st["requests"] != len(records):
        raise SystemExit(f"client: {ok} answers, server saw {st['requests']} requests, not {len(records)}")
    return wall, st


# ----------------------------------------------------------------------------- auditkit
def default_shard_size() -> int:
    from auditkit_ray.backends.api import APISettings as APIBackend

    return APIBackend.model_construct().default_shard_size()


def api_spec(base_url: str, data: Path, store: Path, shard_size: int | None, concurrency: int) -> dict[str, Any]:
    return {
        "name": "api-bench",
        "model": {
            "type": "api",
            "base_url": base_url,
            "model": MODEL,
            "max_concurrency": concurrency,
            "cache_path": str(store / "api-cache.sqlite"),
        },
        "generation": {"max_new_tokens": MAX_TOKENS},
        "dataset": {"path": str(data), "input_field": "question", "target_field": "answer"},
        "prompt": {"template": "{{ question }} Answer:"},
        "metrics": ["exact_match"],
        "execution": {
            "generation_actors": 1,
            "scoring_actors": 1,
            **({"shard_size": shard_size} if shard_size else {}),
        },
        "store": {"path": str(store)},
        "tracking": {"index": False},
    }


def _actor_pids(res: Any) -> set[int]:
    from auditkit_ray.api import samples_table

    return {json.loads(w)["pid"] for w in samples_table(res).column("worker").to_pylist() if w}


def prime(server: Server, work: Path, store: Path, shard: str, concurrency: int) -> set[int]:
    """``--warm``: a short run of the same model first (64 questions the measured run does not ask, so its
    requests all reach the server), whose generation actor stays loaded for the measured run; its actor's pid."""
    records = [{"id": f"w{i:03d}", "question": f"What is {100 + i} plus {200 + i}?", "answer": str(300 + 2 * i)}
               for i in range(64)]
    data = write_jsonl(work / "prime.jsonl", records)
    size = None if shard == "default" else int(shard)
    res = call_quietly(lambda: run_spec(api_spec(server.base_url, data, store, size, concurrency)))
    return _actor_pids(res)


def run_auditkit(server: Server, data: Path, store: Path, n: int, shard: str, concurrency: int,
                 primed: set[int] | None = None) -> dict[str, Any]:
    server.ask("reset")
    t_start = time.monotonic()
    with timed() as t_run:
        size = None if shard == "default" else int(shard)
        res = call_quietly(lambda: run_spec(api_spec(server.base_url, data, store, size, concurrency)))
    st = server.ask("stats")
    em = res.metrics["exact_match"]
    if st["requests"] < n or res.error_count or em.n != n or em.mean != 1.0:
        from auditkit_ray.api import samples_table

        reasons: dict[str, int] = {}
        for row in samples_table(res).to_pylist():
            for sc in json.loads(row["scores"]):
                if sc.get("status") == "error":
                    why = str(sc.get("reason"))[:160]
                    reasons[why] = reasons.get(why, 0) + 1
        raise SystemExit(f"auditkit (shard_size {shard}): the server saw {st['requests']} requests for {n} samples; "
                         f"{res.error_count} errors, exact_match n={em.n} mean={em.mean}; reasons: {reasons}")
    if primed is not None and (pids := _actor_pids(res)) != primed:
        raise SystemExit(f"--warm: the measured run's generation actor {sorted(pids)} is not the one the short run "
                         f"loaded {sorted(primed)}: no resident engine was reused")
    window = st["last"] - st["first"]
    gen_s = res.perf.generation_s or float("nan")
    out = {"wall": t_run["s"], "rps": n / t_run["s"], "window_rps": (n - 1) / window if window > 0 else float("nan"),
           "generation_s": gen_s, "generation_rps": n / gen_s,
           "extra_requests": st["requests"] - n, "first_request_after": st["first"] - t_start,
           "after_last_request": t_run["s"] - (st["last"] - t_start),
           "server_cpu_per_request": st["cpu_s"] / n * 1000, "server_busy": st["cpu_s"] / window if window > 0 else 0.0}
    note(f"auditkit (shard_size {shard}): {t_run['s']:.2f} s, {out['rps']:.0f} req/s end to end, "
         f"{out['window_rps']:.0f} req/s over the server's window")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, help="requests per phase (default: by mode)")
    ap.add_argument(
        "--shard-sizes",
        default=",".join(map(str, SHARDS)),
        help="auditkit shard_size of each auditkit run ('default': the package's); the first is the headline "
        "(default %(default)s)",
    )
    ap.add_argument("--concurrency", type=int, default=None, help=f"requests in flight (default {CONCURRENCY})")
    ap.add_argument("--latency-ms", type=float, default=None, help=f"server latency (default {LATENCY_S * 1000:g})")
    ap.add_argument("--jitter-ms", type=float, default=None, help="+- this much around the latency (default 0)")
    ap.add_argument("--warm", action="store_true",
                    help="each measured run follows a short run of the same model, whose generation actor stays "
                         "loaded (a resident engine's second run)")
    ap.add_argument("--realistic", action="store_true",
                    help="a hosted model's setting: 300 ms +- 50 ms, 256 in flight, 10,000 requests, default shards")
    ap.add_argument(
        "--server-defaults",
        action="store_true",
        help=f"keep http.server's socket defaults (listen backlog 5, Nagle on) instead of backlog {BACKLOG} "
        "and TCP_NODELAY",
    )
    a = ap.parse_args(argv)
    latency_s = (a.latency_ms if a.latency_ms is not None else 300.0 if a.realistic else LATENCY_S * 1000) / 1000
    jitter_s = (a.jitter_ms if a.jitter_ms is not None else 50.0 if a.realistic else 0.0) / 1000
    a.concurrency = a.concurrency or (256 if a.realistic else CONCURRENCY)
    n = a.requests or (10_000 if a.realistic and a.mode != "smoke" else REQUESTS[a.mode])
    if a.realistic and a.shard_sizes == ",".join(map(str, SHARDS)):
        a.shard_sizes = "default"
    # issue 50's goals for a resident engine (--warm): 0.95x at a hosted model's latency, 0.8x at 20 ms
    goal_x = (0.95 if a.warm else 0.9) if latency_s >= 0.1 else 0.8
    shards = [x.strip() for x in a.shard_sizes.split(",") if x.strip()]
    for x in shards:
        if x != "default" and not x.isdigit():
            ap.error(f"--shard-sizes: {x!r} is neither 'default' nor a number")
    print_machine()
    rec = Recorder("api", a.mode)
    ideal = a.concurrency / latency_s
    rec.setting(requests=n, concurrency=a.concurrency, latency_s=latency_s, jitter_s=jitter_s, shard_sizes=shards,
                generation_actors=1, warm=a.warm,
                scoring_actors=1, endpoint="chat", max_tokens=MAX_TOKENS, metrics=["exact_match"],
                api_backend="max_concurrency=concurrency, cache on (a fresh file per run), other fields default",
                server="auditkit_ray.testing.OpenAIServer (ThreadingHTTPServer) in its own process",
                server_sockets=("http.server defaults (backlog 5, Nagle on)" if a.server_defaults
                                else f"listen backlog {BACKLOG}, TCP_NODELAY"))
    note(f"{n} requests per phase, {a.concurrency} in flight, {latency_s * 1000:.0f} +- {jitter_s * 1000:.0f} ms "
         "injected latency "
         f"(ideal {ideal:.0f} req/s); auditkit: 1 generation actor, max_concurrency {a.concurrency}, "
         f"shard_size {', then '.join(map(str, shards))}")
    if importlib.util.find_spec("aiohttp") is None:
        # the api backend needs the 'api' extra: report it instead of failing (the client alone is no figure)
        why = "aiohttp is not installed: pip install -e '.[api]'"
        for name in ("api.ray_start", "api.client.rps", "api.auditkit.rps", "api.auditkit.window.rps",
                     "api.ratio.auditkit_vs_client"):
            rec.emit(name, "skipped", f"({why})")
        rec.goal(f"ge_{goal_x}x_client", None, why)
        rec.save(a.json)
        return 0
    work = with_tmpdir("bench-api-")
    records = arith_records(n)
    data = write_jsonl(work / "data.jsonl", records)
    server = Server(latency_s, not a.server_defaults, jitter_s)
    runs: dict[str, dict[str, Any]] = {}
    try:
        c1, st_c1 = run_client(server, records, a.concurrency)
        note(f"client (1st): {c1:.2f} s, {n / c1:.0f} req/s")
        ray_start = start_ray()
        try:
            warm = warm_up()
            for shard in shards:
                store = work / f"store-{shard}"
                primed = prime(server, work, store, shard, a.concurrency) if a.warm else None
                runs[shard] = run_auditkit(server, data, store, n, shard, a.concurrency, primed)
        finally:
            stop_ray()
        rec.emit("api.ray_start", ray_start, "s")
        rec.emit("api.warm_up_run", warm, "s")
        c2, st_c2 = run_client(server, records, a.concurrency)
        note(f"client (2nd): {c2:.2f} s, {n / c2:.0f} req/s")
    finally:
        server.stop()
    client_rps = [n / c1, n / c2]
    client_mean = sum(client_rps) / 2
    rec.emit("api.ideal.rps", ideal, "req/s (concurrency / latency)")
    rec.emit("api.client.rps", client_mean, "req/s (mean of two runs)")
    rec.emit("api.client.run1.rps", client_rps[0], "req/s")
    rec.emit("api.client.run2.rps", client_rps[1], "req/s")
    rec.emit("api.client.cpu_per_request", (st_c1["client_cpu_s"] + st_c2["client_cpu_s"]) / (2 * n) * 1000,
             "ms (the client's process)")
    for k, (st, wall) in enumerate(((st_c1, c1), (st_c2, c2)), start=1):
        rec.emit(f"api.server.client.run{k}.cpu_per_request", st["cpu_s"] / n * 1000, "ms")
        rec.emit(f"api.server.client.run{k}.busy", st["cpu_s"] / wall, "cpu-s per s (1.0 = one core saturated)")
    for k, shard in enumerate(shards):
        r = runs[shard]
        tag = "api.auditkit" if k == 0 else f"api.auditkit.shard{shard}"
        extra = f", shard_size {shard}" + (f" ({default_shard_size()})" if shard == "default" else "")
        rec.emit(f"{tag}.wall", r["wall"], f"s (evaluate(), Ray started{extra})")
        rec.emit(f"{tag}.rps", r["rps"], f"req/s (end to end, Ray start-up excluded{extra})")
        rec.emit(f"{tag}.window.rps", r["window_rps"], f"req/s (server's first to last request{extra})")
        rec.emit(f"{tag}.generation_s", r["generation_s"], f"s (perf.generation_s{extra})")
        rec.emit(f"{tag}.generation.rps", r["generation_rps"], f"req/s (n / perf.generation_s{extra})")
        rec.emit(f"{tag}.extra_requests", r["extra_requests"], f"requests (server-counted beyond N: retries{extra})")
        rec.emit(
            f"{tag}.first_request_after", r["first_request_after"], f"s (evaluate() start to the first request{extra})"
        )
        rec.emit(f"{tag}.after_last_request", r["after_last_request"], f"s (last request to evaluate() return{extra})")
        stag = "api.server.auditkit" if k == 0 else f"api.server.auditkit.shard{shard}"
        rec.emit(f"{stag}.cpu_per_request", r["server_cpu_per_request"], "ms")
        rec.emit(f"{stag}.busy", r["server_busy"], "cpu-s per s (over the window)")
        rtag = "api.ratio" if k == 0 else f"api.ratio.shard{shard}"
        rec.emit(f"{rtag}.auditkit_vs_client", r["rps"] / client_mean, "x")
        rec.emit(f"{rtag}.window_vs_client", r["window_rps"] / client_mean, "x")
    rec.emit("api.ratio.client_vs_ideal", client_mean / ideal, "x")
    ratio = runs[shards[0]]["rps"] / client_mean
    rec.goal(f"ge_{goal_x}x_client", ratio >= goal_x,
             f"{ratio:.2f}x end to end, Ray start-up excluded, shard_size {shards[0]}, "
             f"{latency_s * 1000:.0f} ms latency, {a.concurrency} in flight")
    rmtree(work)
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
