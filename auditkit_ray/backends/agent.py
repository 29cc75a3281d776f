"""``agent``: drive an agent over HTTP or as a Python callable, multi-turn,
and record the episode into a ``Generation``.

The agent owns its environment and executes its own tools; this backend
drives the episode step by step and records what happened. One *step* is one
request to the agent; its reply holds the turn(s) the agent took.

Step request (HTTP ``POST`` of JSON to ``url``, or the one argument of the
callable)::

    {"episode_id": "<sample id>#<repeat>", "sample_id": ..., "repeat": 0,
     "turn": 0,                      # step index, 0-based
     "input": <the prompt: text or chat messages>,
     "messages": [...],              # the whole conversation so far (OpenAI style)
     "tools": [...],                 # tool schemas (request metadata "tools", else the spec's)
     "state": <the "state" of the previous reply, or null>,
     "metadata": {...},              # the request's metadata (e.g. initial_state), tools removed
     "seed": 0, "generation": {...}} # generation settings, when the run has them

Step reply (every key optional)::

    {"messages": [...],              # new OpenAI-style messages (assistant tool_calls + tool results)
     # or, instead of messages:
     "tool_calls": [{"id", "name", "arguments"}], "tool_results": [{"id", "content", "error"}],
     "output": "final answer", "done": true, "state": {...},
     "final_state": {...}, "artifacts": {...}, "contexts": [...], "judge_verdict": ...,
     "usage": {"prompt_tokens": 0, "completion_tokens": 0}}

Each assistant message in ``messages`` is one turn (its tool calls are
parallel); ``tool_calls`` without ``messages`` is one turn. The episode ends
when a reply says ``done: true``, when a reply without ``done`` makes no tool
call (the agent answered), or after ``max_turns`` steps (finish reason
``max_turns``). Later values of ``final_state``/``artifacts``/``output``
replace earlier ones; ``contexts`` accumulate.

HTTP failures are retried (``max_retries``, exponential backoff) on
connection errors, timeouts, 408, 429 and 5xx; an agent should treat a
repeated ``(episode_id, turn)`` as the same step. A failed episode becomes
``Generation.error`` (with what was recorded before the failure) and does not
stop the run. Header values under secret-looking names (``Authorization``,
``X-Api-Key``...) never reach fingerprints, results or messages.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any, Callable, ClassVar, Literal

from pydantic import Field, model_validator

from ..agents.trace import Episode, ToolResult, Turn, from_openai_messages
from ..core.backends import BackendSettings
from ..core.secrets import scrub_text
from ..core.types import Generation
from ..errors import DataError
from .base import Backend, Request, map_concurrently


class AgentSettings(BackendSettings):
    """An agent over HTTP (``url``) or a Python callable (``callable``),
    driven multi-turn until it stops or ``max_turns`` steps."""

    type: Literal["agent"]
    url: str | None = Field(None, description="agent endpoint (http:// or https://); each step is a POST of JSON")
    callable: str | None = Field(None, description="'package.module:function' taking the step request dict, "
                                 "returning the reply dict")
    max_turns: int = Field(8, ge=1, description="most steps per episode")
    timeout_s: float = Field(60.0, gt=0, description="per HTTP request")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers; values under secret-looking "
                                    "names are masked and never fingerprinted")
    tools: list[dict[str, Any]] | None = Field(None, description="tool schemas sent when a request carries none")
    max_retries: int = Field(2, ge=0)
    concurrency: int = Field(1, ge=1, description="episodes run at once inside one generation actor")
    batch_size: int = Field(16, ge=1)

    not_in_identity: ClassVar[frozenset[str]] = frozenset({"timeout_s", "max_retries", "concurrency", "batch_size"})
    secret_maps: ClassVar[tuple[str, ...]] = ("headers",)

    @model_validator(mode="after")
    def _one_target(self) -> "AgentSettings":
        if (self.url is None) == (self.callable is None):
            raise ValueError("set exactly one of 'url' and 'callable'")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
        if self.callable is not None and ":" not in self.callable:
            raise ValueError(f"callable must be 'package.module:function', got {self.callable!r}")
        return self

    def calls_tools(self) -> bool:
        return True  # each step's request carries the sample's tools


class AgentError(Exception):
    """The agent could not be reached or answered with something unreadable."""


_RETRY_CODES = {408, 429}


class AgentBackend(Backend):
    def __init__(self, spec: Any, generation: Any, seed: int = 0) -> None:
        super().__init__(spec, generation, seed)
        self._fn: Callable[[dict[str, Any]], Any] | None = None

    def load(self) -> None:
        if self.spec.callable and self._fn is None:
            from ..agents.matching import load_callable

            self._fn = load_callable(self.spec.callable, "agent callable")

    def generate(self, requests: list[Request]) -> list[Generation]:
        self.load()
        return map_concurrently(self._episode, requests, self.spec.concurrency)

    # -- one step -------------------------------------------------------------
    def _step(self, payload: dict[str, Any]) -> dict[str, Any]:
        if self._fn is not None:
            try:
                reply = self._fn(payload)
            except Exception as exc:  # noqa: BLE001 - the agent failed this episode
                raise AgentError(f"agent callable raised {type(exc).__name__}: {exc}") from None
        else:
            reply = self._post(payload)
        if not isinstance(reply, dict):
            raise AgentError(f"the agent replied with {type(reply).__name__}, not a JSON object")
        return reply

    def _post(self, payload: dict[str, Any]) -> Any:
        data = json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json", **self.spec.headers}
        last = ""
        for attempt in range(self.spec.max_retries + 1):
            req = urllib.request.Request(self.spec.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.spec.timeout_s) as resp:  # noqa: S310 - url validated
                    body = resp.read()
                try:
                    return json.loads(body.decode("utf-8"))
                except ValueError:
                    raise AgentError(f"the agent's reply is not JSON: {body[:200]!r}") from None
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:200].decode("utf-8", "replace") if exc.fp else ""
                last = f"HTTP {exc.code} from the agent: {detail}"
                if not (exc.code in _RETRY_CODES or exc.code >= 500):
                    break
            except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as exc:
                last = f"cannot reach the agent: {getattr(exc, 'reason', exc)}"
            if attempt < self.spec.max_retries:
                time.sleep(min(2.0, 0.1 * 2**attempt))
        raise AgentError(scrub_text(last))

    # -- one episode ------------------------------------------------------------
    def _episode(self, r: Request) -> Generation:
        meta = dict(r.metadata or {})
        tools = meta.pop("tools", None) or self.spec.tools or []
        messages: list[dict[str, Any]] = (
            [{"role": "user", "content": r.prompt}] if isinstance(r.prompt, str) else [dict(m) for m in r.prompt]
        )
        settings = self.generation.model_dump(mode="json") if hasattr(self.generation, "model_dump") else None
        turns: list[Turn] = []
        ep: dict[str, Any] = {
            "output": None,
            "final_state": None,
            "artifacts": None,
            "contexts": None,
            "judge_verdict": None,
        }
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        saw_usage = False
        state: Any = None
        finish, error = "max_turns", None
        t0 = time.perf_counter()
        steps = 0
        try:
            for step in range(self.spec.max_turns):
                payload = {
                    "episode_id": f"{r.sample_id}#{r.repeat}", "sample_id": r.sample_id, "repeat": r.repeat,
                    "turn": step, "input": r.prompt, "messages": messages, "tools": tools, "state": state,
                    "metadata": meta, "seed": self.seed,
                }
                if settings is not None:
                    payload["generation"] = settings
                reply = self._step(payload)
                steps += 1
                new_msgs, new_turns, answer = _read_reply(reply)
                messages = messages + new_msgs
                turns += new_turns
                state = reply.get("state", state)
                if answer is not None:
                    ep["output"] = answer
                for key in ("final_state", "artifacts", "judge_verdict"):
                    if reply.get(key) is not None:
                        ep[key] = reply[key]
                if isinstance(reply.get("contexts"), list):
                    ep["contexts"] = (ep["contexts"] or []) + reply["contexts"]
                u = reply.get("usage")
                if isinstance(u, dict):
                    saw_usage = True
                    for k in usage:
                        if isinstance(u.get(k), int):
                            usage[k] += u[k]
                done = reply.get("done")
                if done is True or (done is None and not any(t.calls for t in new_turns)):
                    finish = "stop"
                    break
        except (AgentError, DataError) as exc:
            error, finish = scrub_text(str(exc)), "error"
        episode = Episode(id=f"{r.sample_id}#{r.repeat}", turns=turns,
                          output=ep["output"] if ep["output"] is not None else ("" if error is None else None),
                          final_state=ep["final_state"], artifacts=ep["artifacts"], contexts=ep["contexts"],
                          judge_verdict=ep["judge_verdict"], metadata={"messages": messages, "steps": steps})
        return episode.to_generation(
            latency_s=time.perf_counter() - t0, latency_scope="request", finish_reason=finish, error=error,
            prompt_tokens=usage["prompt_tokens"] if saw_usage else None,
            completion_tokens=usage["completion_tokens"] if saw_usage else None,
            token_source="provider" if saw_usage else None,
        )


def _read_reply(reply: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Turn], str | None]:
    """(new messages, turns, final answer or None) from one step reply."""
    answer = reply.get("output") if isinstance(reply.get("output"), str) else None
    msgs = reply.get("messages")
    if msgs is not None:
        if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
            raise AgentError("'messages' in the agent's reply must be a list of objects")
        ep = from_openai_messages(msgs)
        if answer is None:
            answer = next(
                (
                    m.get("content")
                    for m in reversed(msgs)
                    if m.get("role") == "assistant" and not m.get("tool_calls") and m.get("content") is not None
                ),
                None,
            )
        return list(msgs), list(ep.turns), answer
    raw_calls = reply.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise AgentError("'tool_calls' in the agent's reply must be a list")
    turn = Turn(content=reply.get("content"))
    for rc in raw_calls:
        turn.add_call(rc)
    for i, res in enumerate(reply.get("tool_results") or []):
        if not isinstance(res, dict):
            res = {"content": res}
        cid = res.get("id", res.get("call_id"))
        if cid is None and i < len(turn.calls):
            cid = turn.calls[i].id
        name = res.get("name") or next((c.name for c in turn.calls if cid and c.id == cid), None)
        turn.results.append(
            ToolResult(call_id=cid, name=name, content=res.get("content"), error=bool(res.get("error", False)))
        )
    if not turn.calls and turn.content is None and answer is None:
        return [], [], None
    msgs_out = Episode(turns=[turn]).to_openai_messages() if turn.calls else []
    if answer is not None and not turn.calls:
        msgs_out.append({"role": "assistant", "content": answer})
    return msgs_out, [turn], answer
