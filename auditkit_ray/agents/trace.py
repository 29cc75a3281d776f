"""Agent traces: an episode is a list of turns.

A *turn* is one response of the agent: the tool calls it issued together
(parallel, independent of each other) and their results. Calls in a later
turn may depend on results of earlier ones. References are grouped by turn
the same way (``Sample.reference_tool_calls: list[list[ToolCall]]``).

Where things live
-----------------
* ``Generation.tool_calls``: the agent's calls grouped by turn (turns without
  a call are left out). ``None`` means *no trace was recorded* (metrics that
  need one score ``unknown``); ``[]`` means the agent made no call.
* ``Generation.metadata`` (keys in ``META_*`` below): ``tool_results`` (per
  turn, aligned with ``tool_calls``), ``incomplete_calls`` (``[turn, index]``
  of calls whose arguments were not recorded: argument-sensitive metrics are
  ``unknown``), ``malformed_calls`` (``[turn, index, raw]``: arguments that were
  not a JSON object; the call is kept with ``{}`` and counts as wrong),
  ``final_state``, ``artifacts``, ``contexts``, ``messages``, ``judge_verdict``,
  ``output_missing`` (true when no final answer was recorded).
* Alternative reference routes: ``Sample.metadata["reference_routes"]``, a
  list of turn-lists, or ``{"any_of": [turn-list, ...]}``. Routes are taken in
  this order: ``Sample.reference_tool_calls`` first (when set), then the listed
  routes (a duplicate of the first is skipped). A sample read by the generic
  dataset reader keeps ``reference_tool_calls``/``tools``/``expected_state``
  in ``metadata``; ``sample_field`` looks there too.

JSONL trace format (``read_jsonl_traces``)
------------------------------------------
One JSON object per line; ``episode`` (or ``episode_id``) names the episode,
lines of several episodes may interleave, and line order is kept inside a
turn::

    {"episode": "e1", "turn": 0, "type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}
    {"episode": "e1", "turn": 0, "type": "tool_call", "id": "c2", "name": "get_time", "arguments": {"tz": "CET"}}
    {"episode": "e1", "turn": 0, "type": "tool_result", "id": "c1", "content": {"temp": 21}, "error": false}
    {"episode": "e1", "turn": 1, "type": "message", "role": "assistant", "content": "It is 21 C."}
    {"episode": "e1", "type": "final", "output": "It is 21 C.", "final_state": {...}, "artifacts": {...}}

``turn`` is a 0-based integer: calls that share it were issued together.
``arguments`` may be an object or a JSON string; a ``tool_call`` line without
``arguments`` (or with ``null``) is recorded as *incomplete*. ``final`` lines
(any number; later keys win) carry ``output``, ``final_state``, ``artifacts``,
``contexts``, ``judge_verdict`` and free ``metadata``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field

from ..core.metric import MissingEvidence
from ..core.types import Generation, Sample, ToolCall
from ..errors import DataError

META_RESULTS = "tool_results"
META_INCOMPLETE = "incomplete_calls"
META_MALFORMED = "malformed_calls"
META_FINAL_STATE = "final_state"
META_ARTIFACTS = "artifacts"
META_CONTEXTS = "contexts"
META_MESSAGES = "messages"
META_JUDGE = "judge_verdict"
META_OUTPUT_MISSING = "output_missing"
ROUTES_KEY = "reference_routes"

Turns = list[list[ToolCall]]


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolResult(_M):
    call_id: str | None = None
    name: str | None = None
    content: Any = None
    error: bool = False


class Turn(_M):
    calls: list[ToolCall] = Field(default_factory=list)
    results: list[ToolResult] = Field(default_factory=list)
    content: str | None = None
    #: indexes (into ``calls``) whose arguments were not recorded
    incomplete: list[int] = Field(default_factory=list)
    #: index -> raw argument text that was not a JSON object
    malformed: dict[int, str] = Field(default_factory=dict)

    def add_call(self, raw: Any) -> ToolCall:
        """Append a call read from a recorded form (see ``parse_call``), noting
        whether its arguments were not recorded or not a JSON object."""
        call, status = parse_call(raw, strict=False)
        i = len(self.calls)
        self.calls.append(call)
        if status == "incomplete":
            self.incomplete.append(i)
        elif status.startswith("malformed:"):
            self.malformed[i] = status[len("malformed:"):]
        return call


class Episode(_M):
    id: str | None = None
    turns: list[Turn] = Field(default_factory=list)
    output: str | None = None
    final_state: dict[str, Any] | None = None
    artifacts: dict[str, Any] | None = None
    contexts: list[Any] | None = None
    judge_verdict: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    # -- converters ---------------------------------------------------------
    def tool_calls(self) -> Turns:
        """The ``Generation.tool_calls`` shape: calls by turn, turns without a call left out."""
        return [list(t.calls) for t in self.turns if t.calls]

    def to_generation(self, **fields: Any) -> Generation:
        """A Generation recording this episode (see the module docstring for
        the metadata keys)."""
        meta: dict[str, Any] = dict(self.metadata)
        calls, results, incomplete, malformed = [], [], [], []
        for t in self.turns:
            if not t.calls:
                continue
            k = len(calls)
            calls.append(list(t.calls))
            results.append([r.model_dump(mode="json") for r in t.results])
            incomplete += [[k, i] for i in t.incomplete]
            malformed += [[k, int(i), raw] for i, raw in sorted(t.malformed.items())]
        meta[META_RESULTS] = results
        if incomplete:
            meta[META_INCOMPLETE] = incomplete
        if malformed:
            meta[META_MALFORMED] = malformed
        for key, value in ((META_FINAL_STATE, self.final_state), (META_ARTIFACTS, self.artifacts),
                           (META_CONTEXTS, self.contexts), (META_JUDGE, self.judge_verdict)):
            if value is not None:
                meta[key] = value
        if self.output is None:
            meta[META_OUTPUT_MISSING] = True
        text = self.output if self.output is not None else ""
        return Generation(text=text, tool_calls=calls, metadata=meta, **fields)

    @classmethod
    def from_generation(cls, generation: Generation) -> "Episode":
        trace = generation_trace(generation)
        meta = generation.metadata or {}
        results = meta.get(META_RESULTS) or []
        turns = []
        for k, calls in enumerate(trace.turns):
            rs = results[k] if k < len(results) else []
            turns.append(Turn(
                calls=list(calls),
                results=[ToolResult.model_validate(r) for r in rs],
                incomplete=sorted(i for (t, i) in trace.incomplete if t == k),
                malformed={i: raw for (t, i), raw in trace.malformed.items() if t == k},
            ))
        return cls(turns=turns, output=generation.text, final_state=meta.get(META_FINAL_STATE),
                   artifacts=meta.get(META_ARTIFACTS), contexts=meta.get(META_CONTEXTS),
                   judge_verdict=meta.get(META_JUDGE))

    def to_openai_messages(self) -> list[dict[str, Any]]:
        """The episode as OpenAI chat messages (assistant ``tool_calls`` with
        JSON-string arguments, then one ``tool`` message per result)."""
        out: list[dict[str, Any]] = []
        for ti, t in enumerate(self.turns):
            msg: dict[str, Any] = {"role": "assistant", "content": t.content}
            if t.calls:
                msg["tool_calls"] = [
                    {"id": c.id or f"call_{ti}_{i}", "type": "function",
                     "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                    for i, c in enumerate(t.calls)
                ]
            out.append(msg)
            for i, r in enumerate(t.results):
                cid = r.call_id or (t.calls[i].id if i < len(t.calls) and t.calls[i].id else f"call_{ti}_{i}")
                content = r.content if isinstance(r.content, str) else json.dumps(r.content, ensure_ascii=False)
                out.append({"role": "tool", "tool_call_id": cid, "content": content})
        if self.output is not None and (
            not self.turns or self.turns[-1].calls or self.turns[-1].content != self.output
        ):
            out.append({"role": "assistant", "content": self.output})
        return out


# --------------------------------------------------------------------------- calls
_ABSENT = object()


def _parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, malformed raw text). ``(None, None)`` when absent."""
    if raw is _ABSENT or raw is None:
        return None, None
    if isinstance(raw, dict):
        return dict(raw), None
    if isinstance(raw, str):
        if raw.strip() == "":
            return {}, None
        try:
            value = json.loads(raw)
        except ValueError:
            return {}, raw
        if isinstance(value, dict):
            return value, None
        return {}, raw
    return {}, json.dumps(raw, default=str)


def parse_call(obj: Any, *, strict: bool = True) -> tuple[ToolCall, str]:
    """One call from ``ToolCall``, ``{"name", "arguments", "id"}``, an OpenAI
    ``{"id", "function": {"name", "arguments"}}`` or a BFCL-style
    ``{"tool_name": {arguments}}``. Returns (call, status) where status is
    ``ok``, ``incomplete`` (no arguments recorded) or ``malformed:<raw>``.
    With ``strict`` (references) anything but ``ok`` raises ``DataError``,
    except absent arguments, which mean ``{}`` in a reference."""
    if isinstance(obj, ToolCall):
        return obj, "ok"
    if not isinstance(obj, dict):
        raise DataError(f"a tool call must be an object, got {type(obj).__name__}: {obj!r}")
    if "function" in obj and isinstance(obj["function"], dict):
        fn = obj["function"]
        name, raw, cid = fn.get("name"), fn.get("arguments", _ABSENT), obj.get("id")
    elif "name" in obj:
        name, raw, cid = obj.get("name"), obj.get("arguments", obj.get("args", _ABSENT)), obj.get("id")
    elif len(obj) == 1 and isinstance(next(iter(obj.values())), dict):
        name, raw = next(iter(obj.items()))
        cid = None
    else:
        raise DataError(f"cannot read a tool call from {obj!r}: expected 'name' and 'arguments'")
    if not isinstance(name, str) or not name:
        raise DataError(f"tool call without a name: {obj!r}")
    args, bad = _parse_arguments(raw)
    if bad is not None:
        if strict:
            raise DataError(f"tool call {name!r}: arguments are not a JSON object: {bad!r}")
        return ToolCall(name=name, arguments={}, id=cid), "malformed:" + bad
    if args is None:
        return ToolCall(name=name, arguments={}, id=cid), "ok" if strict else "incomplete"
    return ToolCall(name=name, arguments=args, id=cid), "ok"


def parse_turns(obj: Any) -> Turns:
    """A reference turn-list: a list of turns, each a list of calls."""
    if obj is None:
        raise DataError("a reference turn-list is missing")
    if not isinstance(obj, list):
        raise DataError(f"a reference must be a list of turns (lists of calls), got {type(obj).__name__}")
    turns: Turns = []
    for i, turn in enumerate(obj):
        if not isinstance(turn, list):
            raise DataError(
                f"reference turn {i} is a {type(turn).__name__}, not a list of calls: group reference calls "
                "by turn, e.g. [[call_a, call_b], [call_c]] (a and b parallel, c after them)"
            )
        turns.append([parse_call(c)[0] for c in turn])
    return turns


def dump_turns(turns: Turns) -> list[list[dict[str, Any]]]:
    """A turn-list as plain JSON (for ``reference_tool_calls`` or
    ``metadata.reference_routes`` in a dataset file); ``parse_turns`` reads it back."""
    return [[{"name": c.name, "arguments": c.arguments, **({"id": c.id} if c.id else {})} for c in t] for t in turns]


def reference_routes(sample: Sample) -> list[Turns] | None:
    """All acceptable reference routes of a sample, in tie order (see the
    module docstring); ``None`` when the sample has no reference."""
    routes: list[Turns] = []
    first = sample.reference_tool_calls
    if first is None and "reference_tool_calls" in (sample.metadata or {}):
        first = parse_turns(sample.metadata["reference_tool_calls"])
    if first is not None:
        routes.append([list(t) for t in first])
    extra = (sample.metadata or {}).get(ROUTES_KEY)
    if isinstance(extra, dict):
        if set(extra) != {"any_of"}:
            raise DataError(f"sample {sample.id!r}: metadata.{ROUTES_KEY} as an object takes only 'any_of'")
        extra = extra["any_of"]
    if extra is not None:
        if not isinstance(extra, list):
            raise DataError(f"sample {sample.id!r}: metadata.{ROUTES_KEY} must be a list of turn-lists")
        for r in extra:
            turns = parse_turns(r)
            if not any(_same_turns(turns, x) for x in routes):
                routes.append(turns)
    return routes or None


def _same_turns(a: Turns, b: Turns) -> bool:
    from .canon import canonical

    def key(t: Turns) -> Any:
        return tuple(tuple(sorted((c.name, canonical(c.arguments)) for c in turn)) for turn in t)

    return key(a) == key(b)


def sample_field(sample: Sample, name: str) -> Any:
    """A Sample agent field, falling back to ``metadata[name]`` (where the
    generic dataset reader leaves unknown columns)."""
    value = getattr(sample, name, None)
    if value is None:
        value = (sample.metadata or {}).get(name)
    return value


# --------------------------------------------------------------------------- generation traces
class Trace:
    """The agent's calls by turn, read from a Generation, with the calls whose
    arguments are unknown (``incomplete``) or not a JSON object (``malformed``)."""

    def __init__(self, turns: Turns, incomplete: set[tuple[int, int]] | None = None,
                 malformed: dict[tuple[int, int], str] | None = None) -> None:
        self.turns = turns
        self.incomplete = incomplete or set()
        self.malformed = malformed or {}

    @property
    def n_calls(self) -> int:
        return sum(len(t) for t in self.turns)

    def require_arguments(self) -> None:
        if self.incomplete:
            where = ", ".join(f"turn {t} call {i} ({self.turns[t][i].name})" for t, i in sorted(self.incomplete)
                              if t < len(self.turns) and i < len(self.turns[t]))
            raise MissingEvidence(f"tool arguments were not recorded for {where or 'some calls'}")


def generation_trace(generation: Generation) -> Trace:
    """The trace of a Generation. ``Generation.tool_calls`` when recorded;
    otherwise imported from ``metadata["messages"]`` (OpenAI style); otherwise
    ``MissingEvidence`` (no trace is not the same as no call)."""
    meta = generation.metadata or {}
    if generation.tool_calls is None:
        msgs = meta.get(META_MESSAGES)
        if isinstance(msgs, list):
            ep = from_openai_messages(msgs)
            g = ep.to_generation()
            return generation_trace(g)
        raise MissingEvidence("no tool-call trace was recorded for this generation")
    turns = [list(t) for t in generation.tool_calls]
    incomplete = {(int(t), int(i)) for t, i in (meta.get(META_INCOMPLETE) or [])}
    malformed = {(int(m[0]), int(m[1])): str(m[2]) for m in (meta.get(META_MALFORMED) or [])}
    return Trace(turns, incomplete, malformed)


# --------------------------------------------------------------------------- importers
def from_openai_messages(messages: Iterable[Any], *, episode_id: str | None = None) -> Episode:
    """An Episode from an OpenAI-style message list.

    Each assistant message is one turn; its ``tool_calls`` (arguments as JSON
    strings or objects; the legacy ``function_call`` too) are that turn's
    parallel calls. A ``tool`` message is attached, by ``tool_call_id``, to the
    turn holding that call (without an id: to the latest turn with calls).
    The output is the content of the last assistant message without calls.
    """
    turns: list[Turn] = []
    by_id: dict[str, int] = {}
    output: str | None = None
    for pos, m in enumerate(messages):
        if hasattr(m, "model_dump"):
            m = m.model_dump(exclude_none=True)
        if not isinstance(m, dict):
            raise DataError(f"message {pos} is not an object: {m!r}")
        role = m.get("role")
        if role == "assistant":
            raw_calls = list(m.get("tool_calls") or [])
            if m.get("function_call"):
                raw_calls.append({"function": m["function_call"]})
            turn = Turn(content=m.get("content"))
            for rc in raw_calls:
                call = turn.add_call(rc)
                if call.id:
                    by_id[call.id] = len(turns)
            turns.append(turn)
            if not raw_calls and m.get("content") is not None:
                output = m.get("content")
        elif role in ("tool", "function"):
            cid = m.get("tool_call_id")
            k = by_id.get(cid) if cid else None
            if k is None:
                k = next((j for j in range(len(turns) - 1, -1, -1) if turns[j].calls), None)
            if k is None:
                raise DataError(f"message {pos}: a tool result before any tool call")
            content = m.get("content")
            name = m.get("name")
            if name is None and cid:
                name = next((c.name for c in turns[k].calls if c.id == cid), None)
            turns[k].results.append(ToolResult(call_id=cid, name=name, content=_maybe_json(content)))
    # a message list is the whole transcript: no final text means no answer
    return Episode(id=episode_id, turns=turns, output=output if output is not None else "")


def _maybe_json(content: Any) -> Any:
    if isinstance(content, str):
        s = content.strip()
        if s[:1] in "{[":
            try:
                return json.loads(s)
            except ValueError:
                return content
    return content


def read_jsonl_traces(source: str | Path | Iterable[str]) -> dict[str, Episode]:
    """Episodes from a JSONL trace (the line format is in the module docstring),
    keyed by episode id, in order of first appearance."""
    if isinstance(source, (str, Path)) and Path(source).exists():
        lines: Iterable[str] = Path(source).read_text(encoding="utf-8").splitlines()
        where = str(source)
    elif isinstance(source, (str, Path)):
        raise DataError(f"{source}: no such trace file")
    else:
        lines, where = source, "<lines>"
    eps: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except ValueError as exc:
            raise DataError(f"{where}:{n}: not JSON ({exc})") from None
        if not isinstance(ev, dict):
            raise DataError(f"{where}:{n}: a trace line must be an object")
        eid = ev.get("episode", ev.get("episode_id"))
        if eid is None:
            raise DataError(f"{where}:{n}: missing 'episode'")
        ep = eps.setdefault(str(eid), {"turns": {}, "final": {}})
        kind = ev.get("type")
        if kind == "final":
            ep["final"].update({k: v for k, v in ev.items() if k not in ("episode", "episode_id", "type")})
            continue
        if kind not in ("tool_call", "tool_result", "message"):
            raise DataError(f"{where}:{n}: unknown line type {kind!r} (tool_call, tool_result, message, final)")
        turn_no = ev.get("turn")
        if isinstance(turn_no, bool) or not isinstance(turn_no, int) or turn_no < 0:
            raise DataError(f"{where}:{n}: 'turn' must be a non-negative integer, got {turn_no!r}")
        turn: Turn = ep["turns"].setdefault(turn_no, Turn())
        if kind == "tool_call":
            raw = {"name": ev.get("name"), "id": ev.get("id")}
            if "arguments" in ev:
                raw["arguments"] = ev["arguments"]
            try:
                turn.add_call(raw)
            except DataError as exc:
                raise DataError(f"{where}:{n}: {exc}") from None
        elif kind == "tool_result":
            cid = ev.get("id", ev.get("call_id"))
            name = ev.get("name") or next((c.name for c in turn.calls if cid and c.id == cid), None)
            turn.results.append(
                ToolResult(call_id=cid, name=name, content=ev.get("content"), error=bool(ev.get("error", False)))
            )
        else:
            if ev.get("role", "assistant") == "assistant":
                turn.content = ev.get("content")
    out: dict[str, Episode] = {}
    for eid, ep in eps.items():
        turns = [ep["turns"][k] for k in sorted(ep["turns"])]
        final = ep["final"]
        output = final.get("output")
        if output is None:
            output = next((t.content for t in reversed(turns) if not t.calls and t.content is not None), None)
        known = {"output", "final_state", "artifacts", "contexts", "judge_verdict", "metadata"}
        extra = {k: v for k, v in final.items() if k not in known}
        out[eid] = Episode(
            id=eid,
            turns=turns,
            output=output,
            final_state=final.get("final_state"),
            artifacts=final.get("artifacts"),
            contexts=final.get("contexts"),
            judge_verdict=final.get("judge_verdict"),
            metadata={**(final.get("metadata") or {}), **extra},
        )
    return out


def write_jsonl_trace(episode: Episode) -> list[str]:
    """The JSONL lines of one episode (inverse of ``read_jsonl_traces``)."""
    eid = episode.id or "episode"
    lines = []
    for k, t in enumerate(episode.turns):
        for i, c in enumerate(t.calls):
            ev: dict[str, Any] = {"episode": eid, "turn": k, "type": "tool_call", "id": c.id, "name": c.name}
            if i not in t.incomplete:
                ev["arguments"] = c.arguments
            lines.append(json.dumps(ev, ensure_ascii=False))
        for r in t.results:
            lines.append(json.dumps({"episode": eid, "turn": k, "type": "tool_result", "id": r.call_id,
                                     "name": r.name, "content": r.content, "error": r.error}, ensure_ascii=False))
        if t.content is not None:
            lines.append(json.dumps({"episode": eid, "turn": k, "type": "message", "role": "assistant",
                                     "content": t.content}, ensure_ascii=False))
    final = {"episode": eid, "type": "final", "output": episode.output, "final_state": episode.final_state,
             "artifacts": episode.artifacts, "contexts": episode.contexts, "judge_verdict": episode.judge_verdict}
    if episode.metadata:
        final["metadata"] = episode.metadata
    lines.append(json.dumps({k: v for k, v in final.items() if v is not None or k == "episode"}, ensure_ascii=False))
    return lines
