"""Read-only inspection of an agent trace (``auditkit-ray inspect``).

For each episode of a JSONL trace (``agents.trace.read_jsonl_traces``): its
turns and tool calls (calls that share a turn were issued together, in
parallel; later turns follow earlier ones, sequentially), which metrics could
score it and why the others cannot (the fields they lack), and what each
oracle needs. Nothing is written and no model is called: judges are listed
with what they would need, never run; the deterministic trajectory metrics
and oracles are run on the episode, which is how a reason such as "no
judge verdict recorded" is found. The samples the episodes answer (tools,
reference calls, expected state, target) come from ``dataset``, a
tool-calling sample file (``agents.dataset``) whose ids are the episode ids;
without one, every metric that needs a reference is shown as lacking it.
"""

from __future__ import annotations

import os
from typing import Any

from .errors import AuditKitError, ConfigError, DataError

#: what each built-in oracle reads, where a user would record it
ORACLE_NEEDS: dict[str, list[str]] = {
    "final_state": ["sample.expected_state", "trace final.final_state"],
    "answer_check": ["sample.target", "trace final.output"],
    "artifact_check": ["params.expected (artifact name -> content or sha256)", "trace final.artifacts"],
    "custom_predicate": ["params.predicate ('module:function') and params.version"],
    "judge_assertion": ["trace final.judge_verdict"],
    "agent_outcome": ["final_state's or answer_check's evidence (the first that decides)",
                      "optionally trace final.judge_verdict (reported alongside)"],
    "oracle": ["params.oracle ('package.module:Class'), then what that oracle requires"],
}


def _turns(episode: Any) -> list[dict[str, Any]]:
    out = []
    for k, t in enumerate(episode.turns):
        calls = [{"name": c.name, "id": c.id, "arguments": None if i in t.incomplete else c.arguments,
                  "incomplete": i in t.incomplete, "malformed": i in t.malformed}
                 for i, c in enumerate(t.calls)]
        results = [{"call_id": r.call_id, "name": r.name, "error": r.error} for r in t.results]
        out.append({"turn": k, "calls": calls, "parallel": len(calls) > 1, "results": results,
                    "content": t.content})
    return out


def _structure(turns: list[dict[str, Any]]) -> str:
    with_calls = [t for t in turns if t["calls"]]
    if not with_calls:
        return "no tool call"
    parts = []
    for t in with_calls:
        names = ", ".join(c["name"] for c in t["calls"])
        kind = f"{len(t['calls'])} calls in parallel" if t["parallel"] else "1 call"
        parts.append(f"turn {t['turn']}: {kind} ({names})")
    seq = "sequential across turns" if len(with_calls) > 1 else "a single turn"
    return f"{'; then '.join(parts)} ({seq})"


def _metric_rows(sample: Any, generation: Any, names: list[str] | None) -> tuple[list[dict], list[dict]]:
    from .catalogue import metric_kind
    from .core.metric import Metric
    from .core.registry import build_metric, builtin_names, resolve_metric
    from .core.types import Status

    eligible, not_eligible = [], []
    for name in names or builtin_names():
        row: dict[str, Any] = {"name": name}
        try:
            cls = resolve_metric(name)
        except ConfigError as exc:
            if names:
                raise
            not_eligible.append({**row, "kind": "metric", "missing": [], "reason": f"cannot load: {exc}"})
            continue
        kind = metric_kind(cls.family)
        row.update(kind=kind, family=cls.family, requires=list(cls.requires))
        if cls.pool_name() == "judges":
            # a judge is not built here (that would need its backend): its fields are checked on the class
            missing = Metric.missing_requirements(cls, sample, generation, {})  # type: ignore[arg-type]
            if missing:
                not_eligible.append({**row, "missing": missing, "reason": f"missing {', '.join(missing)}"})
            else:
                eligible.append({**row, "status": None,
                                 "note": "needs a judge backend (params.judge); inspect calls no model"})
            continue
        try:
            metric = build_metric(name, {})
        except (AuditKitError, TypeError, ValueError, ImportError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            not_eligible.append({**row, "missing": [], "reason": f"needs parameters or an extra: {first}"})
            continue
        missing = metric.missing_requirements(sample, generation, {})
        if missing:
            not_eligible.append({**row, "missing": missing, "reason": f"missing {', '.join(missing)}"})
            continue
        if metric.scope == "group" or not (cls.family == "agent" or kind == "oracle"):
            # fields present; scoring it here would take repeats, or (a model-backed metric) load a model
            eligible.append({**row, "status": None, "note": "its fields are present"})
            continue
        scores = metric.evaluate(sample, generation, {"annotations": {}, "repeat": 0})
        s = next((x for x in scores if x.name == metric.output_name), scores[0])
        if s.status in (Status.NOT_TESTED, Status.UNKNOWN):
            not_eligible.append({**row, "missing": [], "status": s.status.value, "reason": s.reason or s.status.value})
        else:
            eligible.append({**row, "status": s.status.value, "value": s.value, "note": s.reason})
    return eligible, not_eligible


def inspect_trace(path: str | os.PathLike, *, dataset: str | os.PathLike | None = None, episode: str | None = None,
                  metrics: list[str] | None = None) -> dict[str, Any]:
    """The inspection of a JSONL agent trace as a JSON-ready dict: ``file``, ``dataset`` and ``episodes``,
    each with ``turns`` (calls, ``parallel``), ``structure`` (in words), ``eligible`` and ``not_eligible``
    metrics (with the ``missing`` fields or the ``reason``) and ``oracles`` (what each needs)."""
    from .agents.dataset import load_tool_samples
    from .agents.trace import read_jsonl_traces
    from .core.types import Sample

    p = os.fspath(path)
    if not os.path.isfile(p):
        raise ConfigError(f"{p}: no such trace file")
    episodes = read_jsonl_traces(p)
    if not episodes:
        raise DataError(f"{p}: no episode in the trace")
    if episode is not None:
        if episode not in episodes:
            raise ConfigError(f"--episode {episode!r}: not in {p} (episodes: {', '.join(episodes)})")
        episodes = {episode: episodes[episode]}
    samples = {s.id: s for s in load_tool_samples(dataset)} if dataset else {}
    out = []
    for eid, ep in episodes.items():
        sample = samples.get(eid)
        matched = sample is not None
        if sample is None:
            sample = Sample(id=eid, input="")
        gen = ep.to_generation()
        turns = _turns(ep)
        eligible, not_eligible = _metric_rows(sample, gen, metrics)
        oracles = []
        for row in eligible + not_eligible:
            if row.get("kind") == "oracle":
                oracles.append({"name": row["name"], "needs": ORACLE_NEEDS.get(row["name"], row.get("requires", [])),
                                "eligible": row in eligible,
                                "reason": row.get("reason") or row.get("note")})
        oracles.sort(key=lambda o: o["name"])
        out.append({
            "id": eid,
            "sample": eid if matched else None,
            "turns": turns,
            "n_turns": len(turns),
            "n_calls": sum(len(t["calls"]) for t in turns),
            "parallel_turns": sum(1 for t in turns if t["parallel"]),
            "structure": _structure(turns),
            "output": ep.output,
            "recorded": sorted(k for k, v in (("final_state", ep.final_state), ("artifacts", ep.artifacts),
                                              ("contexts", ep.contexts), ("judge_verdict", ep.judge_verdict),
                                              ("output", ep.output)) if v is not None),
            "eligible": eligible,
            "not_eligible": not_eligible,
            "oracles": oracles,
        })
    return {"file": p, "dataset": os.fspath(dataset) if dataset else None, "episodes": out}


def format_inspection(report: dict[str, Any]) -> str:
    """``inspect_trace``'s result as text."""
    lines = [f"trace {report['file']}" + (f"  (samples from {report['dataset']})" if report["dataset"] else
                                          "  (no --dataset: references unknown)")]
    for ep in report["episodes"]:
        lines.append("")
        match = "" if ep["sample"] else ("  (no such sample in the dataset)" if report["dataset"] else "")
        lines.append(f"episode {ep['id']}{match}: {ep['n_turns']} turns, {ep['n_calls']} calls; {ep['structure']}")
        for t in ep["turns"]:
            if t["calls"]:
                mode = "parallel" if t["parallel"] else "single"
                lines.append(f"  turn {t['turn']} ({mode}):")
                for c in t["calls"]:
                    args = "(arguments not recorded)" if c["incomplete"] else _short(c["arguments"])
                    bad = "  [malformed arguments]" if c["malformed"] else ""
                    lines.append(f"    {c['name']} {args}{bad}")
                if t["results"]:
                    errs = sum(1 for r in t["results"] if r["error"])
                    lines.append(f"    {len(t['results'])} result(s)" + (f", {errs} error(s)" if errs else ""))
            elif t["content"] is not None:
                lines.append(f"  turn {t['turn']}: message {_short(t['content'])}")
        lines.append(f"  final output: {_short(ep['output']) if ep['output'] is not None else '(none recorded)'}")
        lines.append(f"  recorded: {', '.join(ep['recorded']) or 'nothing beyond the calls'}")
        lines.append(f"  eligible metrics ({len(ep['eligible'])}):")
        for m in ep["eligible"]:
            val = f" = {m['value']:.4g}" if isinstance(m.get("value"), (int, float)) else ""
            note = f"  ({m['note']})" if m.get("note") else ""
            lines.append(f"    {m['name']} [{m['kind']}]{val}{note}")
        lines.append(f"  not eligible ({len(ep['not_eligible'])}):")
        for m in ep["not_eligible"]:
            lines.append(f"    {m['name']} [{m.get('kind', 'metric')}]: {m['reason']}")
        lines.append("  oracles:")
        for o in ep["oracles"]:
            state = "ready" if o["eligible"] else f"not ready: {o['reason']}"
            lines.append(f"    {o['name']}: needs {'; '.join(o['needs']) or 'nothing'} -- {state}")
    return "\n".join(lines)


def _short(v: Any, n: int = 80) -> str:
    import json

    s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)
    return s if len(s) <= n else s[: n - 1] + "…"
