"""A scripted tool-calling agent for tests and demos (stdlib only).

It plays the reference route (route 0) of each sample of ``tools.jsonl``,
executing the calls against a small in-memory environment (weather, time,
currency, flights, bank accounts) that starts from the request's
``metadata.initial_state``. ``metadata.behaviour`` bends the script:

``correct``       follow the reference turns (default)
``split``         every call in a turn of its own (splits parallel calls)
``batch``         every call in one turn (batches dependent calls)
``no_calls``      answer at once, no call
``double``        numbers in arguments doubled (wrong final state)
``loop``          the first turn three times, then the rest
``missing_args``  the trace omits the calls' arguments
``never_stop``    repeat the first turn forever (hits max_turns)

Entry points: ``step(payload)`` (compact reply: ``tool_calls`` and
``tool_results``), ``step_messages(payload)`` (OpenAI-style ``messages``),
and ``serve()`` (an HTTP server on 127.0.0.1 answering ``POST`` with
``step_messages``). The agent keeps no memory: it carries its plan and
environment in the reply's ``state``, which the backend sends back.
"""

from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _load_cases() -> dict[str, dict[str, Any]]:
    out = {}
    for line in (HERE / "tools.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out[rec["id"]] = rec
    return out


CASES = _load_cases()
WEATHER = {"Paris": 18, "London": 14, "Tokyo": 24}
TIMES = {"Asia/Tokyo": "09:00", "Europe/Paris": "02:00"}
RATES = {("USD", "EUR"): 0.92}


# --------------------------------------------------------------------------- environment
def execute(name: str, args: dict[str, Any], env: dict[str, Any]) -> tuple[Any, bool]:
    """(result, is_error); mutates ``env``."""
    try:
        if name == "get_weather":
            return {
                "city": args["city"],
                "temperature": WEATHER[args["city"]],
                "unit": args.get("unit", "celsius"),
            }, False
        if name == "get_time":
            return {"timezone": args["timezone"], "time": TIMES[args["timezone"]]}, False
        if name == "convert_currency":
            rate = RATES[(args["from_currency"], args["to_currency"])]
            return {"amount": round(args["amount"] * rate, 2), "currency": args["to_currency"]}, False
        if name == "search_flights":
            return [
                {
                    "flight_id": "UA100",
                    "origin": args["origin"],
                    "destination": args["destination"],
                    "date": args["date"],
                }
            ], False
        if name == "book_flight":
            env.setdefault("bookings", []).append({"flight_id": args["flight_id"], "passengers": args["passengers"]})
            return {"confirmation": f"CONF-{args['flight_id']}"}, False
        if name == "get_balance":
            return {"account": args["account"], "balance": env["accounts"][args["account"]]}, False
        if name == "transfer_funds":
            acc = env["accounts"]
            acc[args["from_account"]] -= args["amount"]
            acc[args["to_account"]] += args["amount"]
            return {"ok": True}, False
        if name == "delete_account":
            env["accounts"].pop(args["account"])
            return {"ok": True}, False
        return {"error": f"unknown tool {name}"}, True
    except (KeyError, TypeError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}, True


# --------------------------------------------------------------------------- the script
def _double(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return v * 2
    return v


def plan_for(sample_id: str, behaviour: str) -> list[list[dict[str, Any]]]:
    case = CASES.get(sample_id)
    turns = copy.deepcopy(case["reference_tool_calls"]) if case else []
    if behaviour == "split":
        turns = [[c] for t in turns for c in t]
    elif behaviour == "batch":
        turns = [[c for t in turns for c in t]] if any(turns) else []
    elif behaviour == "no_calls":
        turns = []
    elif behaviour == "double":
        turns = [[{**c, "arguments": {k: _double(v) for k, v in c["arguments"].items()}} for c in t] for t in turns]
    elif behaviour == "loop" and turns:
        turns = [turns[0]] * 3 + turns[1:]
    return [t for t in turns if t]


def step(payload: dict[str, Any]) -> dict[str, Any]:
    """One step of the agent (compact reply format)."""
    meta = payload.get("metadata") or {}
    behaviour = meta.get("behaviour", "correct")
    state = payload.get("state")
    if state is None:
        state = {"k": 0, "plan": plan_for(payload["sample_id"], behaviour),
                 "env": copy.deepcopy(meta.get("initial_state") or {})}
    k, plan, env = state["k"], state["plan"], state["env"]
    if behaviour == "never_stop" and plan:
        turn = plan[0]
    elif k < len(plan):
        turn = plan[k]
    else:
        case = CASES.get(payload["sample_id"], {})
        return {
            "output": case.get("target") or "I cannot help with that using these tools.",
            "done": True,
            "final_state": env,
            "state": {**state, "k": k + 1},
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }
    calls, results = [], []
    for i, c in enumerate(turn):
        cid = f"call_{payload['turn']}_{i}"
        result, is_error = execute(c["name"], c["arguments"], env)
        call = {"id": cid, "name": c["name"]}
        if behaviour != "missing_args":
            call["arguments"] = c["arguments"]
        calls.append(call)
        results.append({"id": cid, "content": result, "error": is_error})
    return {"tool_calls": calls, "tool_results": results, "final_state": env,
            "state": {"k": k + 1, "plan": plan, "env": env}, "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


def step_messages(payload: dict[str, Any]) -> dict[str, Any]:
    """One step, with the turn as OpenAI-style messages (arguments as JSON strings)."""
    reply = step(payload)
    msgs: list[dict[str, Any]] = []
    if reply.get("tool_calls"):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], **({"arguments": json.dumps(c["arguments"])} if "arguments" in c else {})}}
            for c in reply["tool_calls"]]})
        for r in reply["tool_results"]:
            msgs.append({"role": "tool", "tool_call_id": r["id"], "content": json.dumps(r["content"])})
    if reply.get("output") is not None:
        msgs.append({"role": "assistant", "content": reply["output"]})
    out = {k: v for k, v in reply.items() if k not in ("tool_calls", "tool_results", "output")}
    out["messages"] = msgs
    return out


def record(sample_id: str, behaviour: str = "correct", max_turns: int = 8) -> list[str]:
    """One episode played to the end, as the lines of a JSONL agent trace
    (``auditkit_ray.agents.trace``: tool_call, tool_result and final lines).
    ``trace.jsonl`` is ``record`` of two cases (``python scripted_agent.py --record``)."""
    case = CASES[sample_id]
    payload: dict[str, Any] = {"sample_id": sample_id, "turn": 0, "state": None,
                               "metadata": {"behaviour": behaviour, "initial_state": case.get("initial_state")}}
    lines: list[str] = []
    for turn in range(max_turns):
        payload["turn"] = turn
        reply = step(payload)
        for c in reply.get("tool_calls") or []:
            lines.append(json.dumps({"episode": sample_id, "turn": turn, "type": "tool_call", **c}, sort_keys=True))
        for r in reply.get("tool_results") or []:
            lines.append(json.dumps({"episode": sample_id, "turn": turn, "type": "tool_result", **r}, sort_keys=True))
        if reply.get("done"):
            lines.append(json.dumps({"episode": sample_id, "type": "final", "output": reply["output"],
                                     "final_state": reply["final_state"]}, sort_keys=True))
            break
        payload["state"] = reply["state"]
    return lines


#: the cases ``trace.jsonl`` records: parallel calls in one turn, and calls in sequence across turns
RECORDED = ("parallel-multiple-tokyo", "sequential-flight")


# --------------------------------------------------------------------------- HTTP
class _Handler(BaseHTTPRequestHandler):
    server: "AgentServer"

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802
        srv = self.server
        with srv.lock:
            srv.requests += 1
            srv.seen_headers.append(dict(self.headers))
            fail = srv.fail_first > 0
            if fail:
                srv.fail_first -= 1
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if fail:
            self._send(503, {"error": "warming up"})
            return
        if srv.token and self.headers.get("Authorization") != f"Bearer {srv.token}":
            self._send(401, {"error": "bad token"})
            return
        try:
            payload = json.loads(body)
            self._send(200, step_messages(payload))
        except Exception as exc:  # noqa: BLE001
            self._send(500, {"error": f"{type(exc).__name__}: {exc}"})


class AgentServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: tuple[str, int], token: str | None = None, fail_first: int = 0) -> None:
        super().__init__(addr, _Handler)
        self.token = token
        self.fail_first = fail_first
        self.requests = 0
        self.seen_headers: list[dict[str, str]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/agent"


def serve(token: str | None = None, fail_first: int = 0) -> AgentServer:
    """Start the agent on 127.0.0.1 (a free port) in a daemon thread; call
    ``shutdown()`` and ``server_close()`` when done."""
    srv = AgentServer(("127.0.0.1", 0), token=token, fail_first=fail_first)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--record"]:
        (HERE / "trace.jsonl").write_text("".join(ln + "\n" for c in RECORDED for ln in record(c)), encoding="utf-8")
        raise SystemExit(0)
    s = serve()
    print(f"scripted agent at {s.url} (Ctrl-C to stop)")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        s.shutdown()
