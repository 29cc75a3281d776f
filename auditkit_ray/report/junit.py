"""JUnit XML for CI systems (Jenkins, GitLab, GitHub test reporters, ...).

Valid against the JUnit schema those systems use (Jenkins xUnit's
``junit-10.xsd``): ``<testsuites>`` > ``<testsuite>`` (properties first) >
``<testcase>`` with ``<failure>``/``<error>``/``<skipped>`` and
``<system-out>``.

- ``per="metric"`` (default): one suite per run, one test case per metric;
  a metric's case fails when a gate on it fails (``--fail-under``,
  ``--fail-over``, ``--max-regression`` against the baseline), with every
  failed gate's reason in the message; a gate on a metric the run lacks is a
  failing case of that name. A metric with no scored sample is skipped.
- ``per="sample"``: one suite per (run, binary metric), one case per sample
  (``sample_id`` or ``sample_id#repeat``); a sample fails when it has the
  worse of the two values (0 for a higher-is-better metric, 1 for a
  lower-is-better one), errors on status ``error`` and is skipped on
  ``unknown``/``not_tested``. Metrics that are not 0/1 per sample are left
  out (listed in the suite's properties). Gates, if any, get a suite of
  their own.

A sweep's failed cells (no result) get a suite ``failed cells`` of their
own in both modes: one case per cell, an ``<error>`` with the reason.

Characters XML 1.0 forbids (control characters from model output) are
replaced with U+FFFD; everything else is escaped by the XML writer.
"""

from __future__ import annotations

import json
import re
import socket
import xml.etree.ElementTree as ET
from typing import Any

from ..compare import text as tx
from ..errors import ConfigError
from .loader import binary_metric, read_samples

_BAD_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
#: characters of model output kept in a case's system-out
MAX_TEXT = 4000


def clean(v: Any) -> str:
    s = "" if v is None else (v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str))
    return _BAD_XML.sub("\ufffd", s)


def _cut(s: Any, n: int = MAX_TEXT) -> str:
    s = clean(s)
    return s if len(s) <= n else s[:n] + f"... [{len(s) - n} more characters]"


def _time(v: float | None) -> str:
    return f"{max(0.0, v or 0.0):.3f}"


def _el(parent: ET.Element, tag: str, text: str | None = None, **attrs: Any) -> ET.Element:
    e = ET.SubElement(parent, tag, {k.rstrip("_"): clean(v) for k, v in attrs.items() if v is not None})
    if text is not None:
        e.text = clean(text)
    return e


def _suite(root: ET.Element, name: str, props: dict[str, Any], timestamp: str, time: float | None = None) -> ET.Element:
    s = _el(root, "testsuite", name=name, tests="0", failures="0", errors="0", skipped="0", time=_time(time),
            timestamp=timestamp, hostname=socket.gethostname() or "localhost")
    p = _el(s, "properties")
    for k, v in props.items():
        if v is not None:
            _el(p, "property", name=k, value=v if isinstance(v, str) else json.dumps(v, default=str))
    return s


def _count(suite: ET.Element) -> None:
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    suite.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
    suite.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))


def _run_props(run: Any) -> dict[str, Any]:
    r = run.result
    return {"run_id": r.run_id, "run_name": r.name, "fingerprint": r.fingerprint,
            "dataset_fingerprint": r.dataset_fingerprint,
            "generation_fingerprint": r.generation_fingerprint, "package_version": r.package_version, "seed": r.seed}


def _metric_cases(report: Any, run: Any, suite: ET.Element) -> None:
    lb = report.board
    gates = [g for g in lb.gates if g.run == run.label]
    names = list(report.metrics) + [g.metric for g in gates if g.metric and g.metric not in report.metrics]
    for m in dict.fromkeys(names):
        s = run.result.metrics.get(m)
        board = lb.metrics.get(m)
        e = next((x for x in board.entries if x.run == run.label), None) if board else None
        case = _el(suite, "testcase", name=m, classname=f"auditkit.{run.label}", time="0.000")
        mine = [g for g in gates if g.metric == m]
        failed = [g for g in mine if not g.passed]
        if failed:
            _el(case, "failure", "\n".join(g.reason for g in failed), message="; ".join(g.reason for g in failed),
                type="gate")
        elif s is None or s.mean is None:
            _el(case, "skipped", message=f"{m}: no scored samples" if s is not None else f"{m}: not in this run")
        out = []
        if s is not None:
            c = s.counts
            out.append(f"{m} {s.direction.arrow} ({s.direction.value}, {s.aggregation}): mean {tx.num(s.mean)}"
                       f" {tx.interval(e.ci_low, e.ci_high) if e else tx.interval(s.ci_low, s.ci_high)}"
                       f" n={s.n} unscored={s.unscored} (unknown {c.get('unknown', 0)}, not_tested "
                       f"{c.get('not_tested', 0)}, error {c.get('error', 0)})"
                       + (f" flaky={s.flaky}" if s.flaky else ""))
            if e is not None and e.rank is not None:
                best = " (best or tied with the best)" if e.tied_with_best else ""
                out.append(f"rank {e.rank} of {len(board.ranked)}{best}")
        cmp = lb.comparisons.get(run.label) if report.baseline is not None else None
        mc = cmp.metrics.get(m) if cmp is not None else None
        if mc is not None and run.label != report.baseline.label:
            out.append(f"vs baseline {report.baseline.label}: {mc.grade}: " + "; ".join(mc.reasons))
        out += [f"gate {'ok' if g.passed else 'FAILED'}: {g.reason}" for g in mine]
        _el(case, "system-out", "\n".join(out))


def _bad_value(direction: Any) -> float:
    return 0.0 if direction.value == "maximize" else 1.0


def _sample_text(row: Any) -> str:
    lines = [f"prompt: {_cut(row.prompt)}", f"target: {_cut(row.target)}", f"raw output: {_cut(row.raw_text)}"]
    if row.text != row.raw_text:
        lines.append(f"output: {_cut(row.text)}")
    for k, v in row.annotations.items():
        lines.append(f"extracted {k}: {_cut(v, 500)}")
    if row.error:
        lines.append(f"error: {_cut(row.error, 1000)}")
    return "\n".join(lines)


def _sample_suites(report: Any, run: Any, root: ET.Element, timestamp: str) -> int:
    rows, why = read_samples(run)
    if rows is None:
        s = _suite(root, f"{run.label}", _run_props(run) | {"note": f"no per-sample cases: {why}"}, timestamp)
        case = _el(s, "testcase", name="per-sample table", classname=f"auditkit.{run.label}", time="0.000")
        _el(case, "error", why, message=why, type="unreadable")
        _count(s)
        return 1
    binary = [m for m in report.metrics if m in run.result.metrics and binary_metric(rows, m)]
    other = [m for m in report.metrics if m in run.result.metrics and m not in binary]
    n = 0
    for m in binary:
        direction = run.result.metrics[m].direction
        bad = _bad_value(direction)
        props = _run_props(run) | {"metric": m, "direction": direction.value, "failure_value": bad,
                                   "non_binary_metrics_left_out": ", ".join(other) or None}
        suite = _suite(root, f"{run.label} / {m}", props, timestamp)
        for row in rows:
            status = row.status(m)
            if status is None:
                continue
            case = _el(suite, "testcase", name=row.label, classname=f"auditkit.{run.label}.{m}",
                       time=_time(row.latency_s))
            sc = row.scores[m]
            if status == "scored":
                if row.value(m) == bad:
                    _el(case, "failure", _sample_text(row), message=f"{m} = {bad:g} ({direction.arrow})", type="wrong")
            elif status == "error":
                msg = sc.get("reason") or row.error or "error"
                _el(case, "error", _sample_text(row), message=f"{m}: {_cut(msg, 500)}", type="error")
            else:
                _el(case, "skipped", message=f"{m}: {status}" + (f" ({sc.get('reason')})" if sc.get("reason") else ""))
            n += 1
        _count(suite)
    return n


def format_junit(report: Any, *, per: str = "metric") -> str:
    if per not in ("metric", "sample"):
        raise ConfigError(f"--junit-per must be 'metric' or 'sample', got {per!r}")
    root = ET.Element("testsuites", {"name": clean(f"auditkit-ray: {report.title}")})
    ts = report.generated_at.replace(" UTC", "").replace(" ", "T")
    lb = report.board
    if per == "metric":
        for run in report.runs:
            suite = _suite(root, run.label, _run_props(run), ts, run.result.perf.wall_s)
            _metric_cases(report, run, suite)
            _count(suite)
    else:
        cases = sum(_sample_suites(report, run, root, ts) for run in report.runs)
        if lb.gates:
            suite = _suite(root, "gates", {}, ts)
            for g in lb.gates:
                case = _el(suite, "testcase", name=g.gate, classname=f"auditkit.{g.run}", time="0.000")
                if not g.passed:
                    _el(case, "failure", g.reason, message=g.reason, type="gate")
                _el(case, "system-out", g.reason)
            _count(suite)
        if not cases and not lb.gates and not report.failed_cells:
            raise ConfigError(
                "--junit-per sample: no metric is binary (0/1 per sample) in these runs; use --junit-per metric")
    if report.failed_cells:
        suite = _suite(root, "failed cells", {}, ts)
        for c in report.failed_cells:
            case = _el(suite, "testcase", name=c.name, classname="auditkit.sweep", time="0.000")
            tries = f" after {c.attempts} attempt(s)" if c.attempts else ""
            _el(case, "error", f"{c.name}: {c.reason}{tries}", message=c.reason, type="cell failed")
            _el(case, "system-out", "\n".join(x for x in (f"cell {c.name} failed{tries}: {c.reason}",
                                                          f"run fingerprint {c.fingerprint}" if c.fingerprint else "")
                                              if x))
        _count(suite)
    suites = root.findall("testsuite")
    for attr in ("tests", "failures", "errors"):
        root.set(attr, str(sum(int(s.get(attr, "0")) for s in suites)))
    root.set("time", _time(sum(float(s.get("time", "0")) for s in suites)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
