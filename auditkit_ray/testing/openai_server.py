"""A small OpenAI-compatible HTTP server for tests and demos, on 127.0.0.1 only.

It answers ``POST /v1/chat/completions`` and ``POST /v1/completions`` (and
``GET /v1/models``), backed either by a model through an auditkit backend
(e.g. the ``hf`` backend on the repo's tiny model) or by a ``ScriptedPolicy``
that decides the reply and can inject latency, 429s (with ``Retry-After``),
500s, malformed bodies and hangs. It counts the requests it receives.

In a thread::

    from auditkit_ray.testing import OpenAIServer, ScriptedPolicy

    with OpenAIServer(ScriptedPolicy(reply="42", faults=[{"status": 429, "times": 2}])) as server:
        server.base_url      # http://127.0.0.1:<port>/v1
        server.requests      # requests received so far (faults included)

As a program::

    python -m auditkit_ray.testing.openai_server --port 8000 --model examples/tiny-model
    python -m auditkit_ray.testing.openai_server --reply "Yes" --fault 429:2 --latency 0.05

Fault rules (``ScriptedPolicy(faults=[...])``), checked in order; the first
that applies answers the request:

- ``status``: an HTTP status (429, 500, 503, 401, ...), ``"malformed"`` (200
  with a body that is not JSON), ``"no_choices"`` (200, JSON without
  ``choices``) or ``"hang"`` (sleep ``hang_s``, then answer normally);
- ``match``: apply only to requests whose prompt text contains this string;
- ``times``: apply to the first N requests of each distinct prompt (then the
  request goes through: a retry succeeds); ``None``: always;
- ``retry_after``: seconds, sent as ``Retry-After`` (429/503).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Reply = str | dict[str, Any]


def prompt_text(body: dict[str, Any]) -> str:
    """The prompt of a request body as one string (chat: the messages' contents; of content parts, the text
    parts)."""
    if "messages" in body:
        parts = []
        for m in body.get("messages") or []:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts += [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "\n".join(parts)
    p = body.get("prompt", "")
    return p if isinstance(p, str) else json.dumps(p)


class ScriptedPolicy:
    """Replies and faults decided by a script.

    ``reply``: a string, or ``reply(body) -> str | dict`` where the dict may
    hold ``content``, ``tool_calls`` (``[{"name", "arguments"}]``),
    ``top_logprobs`` (a list, per output token, of ``{token: logprob}``; the
    first key is the token chosen), ``finish_reason`` and ``usage``."""

    def __init__(self, reply: Reply | Callable[[dict[str, Any]], Reply] = "ok", *, latency_s: float = 0.0,
                 faults: list[dict[str, Any]] | None = None, hang_s: float = 30.0) -> None:
        self.reply = reply
        self.latency_s = latency_s
        self.faults = [dict(f) for f in faults or []]
        self.hang_s = hang_s
        self._seen: dict[tuple[int, str], int] = {}
        self._lock = threading.Lock()

    def fault_for(self, body: dict[str, Any]) -> dict[str, Any] | None:
        text = prompt_text(body)
        with self._lock:
            for k, rule in enumerate(self.faults):
                match = rule.get("match")
                if match is not None and match not in text:
                    continue
                times = rule.get("times")
                n = self._seen.get((k, text), 0)
                if times is not None and n >= times:
                    continue
                self._seen[(k, text)] = n + 1
                return rule
        return None

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        r = self.reply(body) if callable(self.reply) else self.reply
        return {"content": r} if isinstance(r, str) else dict(r)


class ModelPolicy(ScriptedPolicy):
    """Replies from an auditkit backend (loaded once; calls are serialised)."""

    def __init__(self, backend: Any, **kw: Any) -> None:
        super().__init__(reply="", **kw)
        self.backend = backend
        self._model_lock = threading.Lock()

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        from ..backends.base import Request
        from ..config.models import GenerationSettings

        stop = body.get("stop") or []
        settings = GenerationSettings(
            max_new_tokens=int(body.get("max_tokens") or body.get("max_completion_tokens") or 16),
            temperature=float(body.get("temperature") or 0.0),
            top_p=float(body.get("top_p") or 1.0),
            stop=[stop] if isinstance(stop, str) else list(stop),
        )
        if "messages" in body:
            prompt: Any = [{"role": m.get("role", "user"), "content": m.get("content") or ""} for m in body["messages"]]
        else:
            prompt = body.get("prompt", "")
        req = Request(sample_id="server", prompt=prompt, repeat=0)
        with self._model_lock:
            self.backend.generation = settings
            self.backend.seed = int(body.get("seed") or 0)
            gen = self.backend.generate([req])[0]
        if gen.error:
            raise RuntimeError(gen.error)
        return {"content": gen.text, "finish_reason": gen.finish_reason or "stop",
                "usage": {"prompt_tokens": gen.prompt_tokens or 0, "completion_tokens": gen.completion_tokens or 0}}


def _arguments_text(call: dict[str, Any]) -> str:
    """A tool call's arguments as the API sends them: a JSON string."""
    args = call.get("arguments", {})
    return args if isinstance(args, str) else json.dumps(args)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OpenAIServer:
    """The server; ``start()`` runs it in a daemon thread and returns the base URL."""

    def __init__(self, policy: ScriptedPolicy | None = None, *, backend: Any = None, api_key: str | None = None,
                 host: str = "127.0.0.1", port: int = 0, model_name: str = "auditkit-test") -> None:
        if not _is_loopback(host):
            raise ValueError(f"the test server binds to a loopback address only, not {host!r}")
        if policy is None:
            policy = ModelPolicy(backend) if backend is not None else ScriptedPolicy()
        self.policy = policy
        self.api_key = api_key
        self.model_name = model_name
        self.host, self.port = host, port
        self._lock = threading.Lock()
        self.requests = 0
        self.by_path: dict[str, int] = {}
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0

    # ------------------------------------------------------------------ lifecycle
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> str:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = _Server((self.host, self.port), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="openai-test-server", daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "OpenAIServer":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def reset_counts(self) -> None:
        with self._lock:
            self.requests = 0
            self.by_path = {}
            self.bodies = []
            self.headers = []

    # ------------------------------------------------------------------ answers
    def _record(self, path: str, body: Any, headers: dict[str, str]) -> None:
        with self._lock:
            self.requests += 1
            self.by_path[path] = self.by_path.get(path, 0) + 1
            self.bodies.append(body)
            self.headers.append(headers)
            self._ids += 1

    def completion(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        chat = path.endswith("/chat/completions")
        ans = self.policy.answer(body)
        text = ans.get("content")
        calls = ans.get("tool_calls")
        usage = ans.get("usage") or {"prompt_tokens": len(prompt_text(body).split()),
                                     "completion_tokens": len((text or "").split()) + len(calls or [])}
        usage = {**usage, "total_tokens": usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)}
        finish = ans.get("finish_reason") or ("tool_calls" if calls else "stop")
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        tops = ans.get("top_logprobs")
        if chat:
            msg: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                msg["tool_calls"] = [
                    {"id": c.get("id") or f"call_{i}", "type": "function",
                     "function": {"name": c["name"], "arguments": _arguments_text(c)}}
                    for i, c in enumerate(calls)
                ]
            choice["message"] = msg
            if body.get("logprobs") and tops:
                k = int(body.get("top_logprobs") or 0)
                choice["logprobs"] = {"content": [
                    {"token": next(iter(t)), "logprob": next(iter(t.values())),
                     "top_logprobs": [{"token": tok, "logprob": lp} for tok, lp in list(t.items())[:k]]}
                    for t in tops
                ]}
        else:
            choice["text"] = text or ""
            if body.get("logprobs") and tops:
                k = int(body.get("logprobs") or 0)
                choice["logprobs"] = {"tokens": [next(iter(t)) for t in tops],
                                      "token_logprobs": [next(iter(t.values())) for t in tops],
                                      "top_logprobs": [dict(list(t.items())[:k]) for t in tops]}
        return {"id": f"cmpl-{self._ids}", "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()), "model": body.get("model", self.model_name), "choices": [choice],
                "usage": usage}


class _Server(ThreadingHTTPServer):
    """http.server with sockets fit for many clients at once: a listen
    backlog of 1024 (the default 5 overflows when 64 connections open
    together and the kernel drops SYNs, retried after 1 s, 3 s...)."""

    request_queue_size = 1024
    daemon_threads = True


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIServer
    protocol_version = "HTTP/1.1"
    #: TCP_NODELAY: the body, sent after the headers, must not wait ~40 ms for the client's delayed ACK
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status,
                   {"error": {"message": message, "type": "server_error" if status >= 500 else "invalid_request_error",
                                      "code": status}}, headers)

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.owner.model_name, "object": "model"}]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        owner = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except ValueError:
            body = None
        path = self.path.rstrip("/")
        owner._record(path, body, {k.lower(): v for k, v in self.headers.items()})
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return self._error(404, f"no route {self.path}")
        if owner.api_key is not None and self.headers.get("Authorization") != f"Bearer {owner.api_key}":
            return self._error(401, "invalid API key")
        if not isinstance(body, dict):
            return self._error(400, "the request body is not a JSON object")
        if path.endswith("/chat/completions") and not isinstance(body.get("messages"), list):
            return self._error(400, "'messages' is required")
        policy = owner.policy
        rule = policy.fault_for(body)
        if policy.latency_s:
            time.sleep(policy.latency_s)
        if rule is not None:
            status = rule.get("status")
            if status == "hang":
                time.sleep(float(rule.get("hang_s", policy.hang_s)))
            elif status == "malformed":
                return self._send(200, None, raw=b'{"choices": [{"message": {"content": "trunc')
            elif status == "no_choices":
                return self._send(200, {"id": "x", "object": "chat.completion"})
            else:
                headers = {}
                if rule.get("retry_after") is not None:
                    headers["Retry-After"] = f"{float(rule['retry_after']):g}"
                return self._error(int(status), rule.get("message") or f"injected {status}", headers)
        try:
            payload = owner.completion(path, body)
        except Exception as exc:  # noqa: BLE001 - the model failed: a 500, as a real server would
            return self._error(500, f"{type(exc).__name__}: {exc}")
        self._send(200, payload)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m auditkit_ray.testing.openai_server",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--model", help="serve this HF checkpoint through the hf backend (CPU)")
    ap.add_argument("--reply", default="ok", help="scripted reply (without --model)")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    ap.add_argument("--api-key", help="require 'Authorization: Bearer KEY'")
    ap.add_argument("--fault", action="append", default=[], metavar="STATUS[:TIMES[:RETRY_AFTER]]",
                    help="inject a fault: 429:2:0.1 (two 429s per prompt, Retry-After 0.1), 500, malformed, hang")
    args = ap.parse_args(argv)
    faults = []
    for f in args.fault:
        parts = f.split(":")
        rule: dict[str, Any] = {"status": int(parts[0]) if parts[0].isdigit() else parts[0]}
        if len(parts) > 1 and parts[1]:
            rule["times"] = int(parts[1])
        if len(parts) > 2 and parts[2]:
            rule["retry_after"] = float(parts[2])
        faults.append(rule)
    if args.model:
        from ..backends.hf import HFBackend
        from ..backends.hf import HFSettings as HFSpec
        from ..config.models import GenerationSettings

        backend = HFBackend(HFSpec(type="hf", path=args.model, device="cpu", num_gpus=0, batch_size=1),
                            GenerationSettings())
        backend.load()
        policy: ScriptedPolicy = ModelPolicy(backend, latency_s=args.latency, faults=faults)
    else:
        policy = ScriptedPolicy(args.reply, latency_s=args.latency, faults=faults)
    server = OpenAIServer(policy, api_key=args.api_key, host=args.host, port=args.port)
    server.start()
    print(f"serving an OpenAI-compatible API at {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
