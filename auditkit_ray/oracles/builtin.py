"""Built-in outcome oracles and their metrics.

* ``final_state``: ``sample.expected_state`` against the state after the
  episode, ``generation.metadata["final_state"]``, compared canonically (key
  order irrelevant, 1 == 1.0, True != 1). ``mode="subset"`` (default): every
  expected key must be present with a contained value (objects recursively;
  arrays and scalars equal); ``mode="equal"``: the states must be equal.
* ``artifact_check``: named artifacts in ``generation.metadata["artifacts"]``
  exist with the expected content / SHA-256 digest / substring.
* ``answer_check``: the final answer (``generation.text``) against the
  expected answer (``expected`` param, else the sample's targets, else
  ``metadata["expected_answer"]``): ``exact``, ``normalized`` or ``contains``.
* ``custom_predicate``: a Python callable ``module:function`` with a required
  ``version`` that enters the fingerprint.
* ``judge_assertion``: a judge's verdict, read from
  ``generation.metadata["judge_verdict"]``. Diagnostic (family
  ``oracle-diagnostic``): it never overrides a verified check.
* ``agent_outcome``: the headline. The final-state check when it has evidence
  (success or failure), else the answer check, else unknown; the judge is
  reported alongside (``agent_outcome.judge``) and never changes it.

Missing evidence (no final state recorded, no artifacts recorded, no judge
verdict) is ``unknown``, never failure.
"""

from __future__ import annotations

import hashlib
import re
import string
from pathlib import Path
from typing import Any, Callable

from ..agents.canon import canonical_text, diff_paths, json_equal, json_subset
from ..agents.trace import META_ARTIFACTS, META_FINAL_STATE, META_JUDGE, META_OUTPUT_MISSING, sample_field
from ..core.metric import Direction, Metric, MissingEvidence
from ..core.types import Generation, Sample, Score
from .base import Oracle, OracleMetric, Outcome, Verdict


# --------------------------------------------------------------------------- final state
class FinalState(Oracle):
    """Expected environment state vs the state after the episode."""

    name = "final_state"
    requires = ("expected_state",)
    description = "expected environment state vs the final state after the episode (canonical JSON)"

    def __init__(self, *, mode: str = "subset") -> None:
        if mode not in ("subset", "equal"):
            raise TypeError(f"mode must be 'subset' or 'equal', got {mode!r}")
        super().__init__(mode=mode)

    def verdict(self, sample: Sample, generation: Generation, context: dict) -> Verdict:
        expected = sample_field(sample, "expected_state")
        meta = generation.metadata or {}
        if meta.get(META_FINAL_STATE) is None:
            raise MissingEvidence("the episode's final state was not recorded (generation.metadata.final_state)")
        actual = meta[META_FINAL_STATE]
        subset = self.params["mode"] == "subset"
        ok = json_subset(expected, actual) if subset else json_equal(expected, actual)
        if ok:
            return Verdict.success(f"final state {'contains' if subset else 'equals'} the expected state",
                                   mode=self.params["mode"])
        diffs = list(diff_paths(expected, actual, subset=subset))
        return Verdict.failure(
            f"final state differs: {'; '.join(diffs[:3])}", mode=self.params["mode"], differences=diffs[:20]
        )


# --------------------------------------------------------------------------- artifacts
def _digest(content: Any) -> str:
    data = content.encode("utf-8") if isinstance(content, str) else (
        content if isinstance(content, bytes) else canonical_text(content).encode("utf-8"))
    return hashlib.sha256(data).hexdigest()


class ArtifactCheck(Oracle):
    """Named artifacts exist with the expected content, digest or substring.

    Expectations: the ``artifact`` parameter (a name) with any of ``content``,
    ``sha256``, ``contains``; or ``sample.metadata["expected_artifacts"]``
    (``{name: {"content"|"sha256"|"contains": ...}}``). Recorded artifacts:
    ``generation.metadata["artifacts"]`` as ``{name: content}`` or
    ``{name: {"content"?, "sha256"?, "path"?}}`` (a path is read when the
    file is there)."""

    name = "artifact_check"
    description = "named artifacts exist with the expected content or SHA-256 digest"

    def __init__(self, *, artifact: str | None = None, content: Any = None, sha256: str | None = None,
                 contains: str | None = None) -> None:
        if artifact is None and any(v is not None for v in (content, sha256, contains)):
            raise TypeError("content/sha256/contains need the artifact name ('artifact')")
        super().__init__(artifact=artifact, content=content, sha256=sha256, contains=contains)

    def _expected(self, sample: Sample) -> dict[str, dict[str, Any]] | None:
        p = self.params
        if p["artifact"] is not None:
            return {p["artifact"]: {k: p[k] for k in ("content", "sha256", "contains") if p[k] is not None}}
        exp = (sample.metadata or {}).get("expected_artifacts")
        return exp if isinstance(exp, dict) and exp else None

    def missing(self, sample: Sample, generation: Generation | None, context: dict | None) -> list[str]:
        return [] if self._expected(sample) else ["metadata.expected_artifacts (or the artifact parameter)"]

    def verdict(self, sample: Sample, generation: Generation, context: dict) -> Verdict:
        expected = self._expected(sample) or {}
        recorded = (generation.metadata or {}).get(META_ARTIFACTS)
        if not isinstance(recorded, dict):
            raise MissingEvidence("no artifacts were recorded for this episode (generation.metadata.artifacts)")
        results: dict[str, str] = {}
        failures: list[str] = []
        unknown: list[str] = []
        for name, exp in expected.items():
            if name not in recorded:
                results[name] = "missing"
                failures.append(f"{name}: does not exist")
                continue
            content, digest = self._read(recorded[name])
            problems = []
            if "content" in exp:
                if content is _UNSET and digest is None:
                    unknown.append(f"{name}: content not recorded")
                    continue
                if content is not _UNSET:
                    same = (
                        content == exp["content"]
                        if isinstance(exp["content"], str)
                        else json_equal(content, exp["content"])
                    )
                else:
                    same = digest == _digest(exp["content"])
                if not same:
                    problems.append("content differs")
            if "sha256" in exp:
                have = digest if digest is not None else (_digest(content) if content is not _UNSET else None)
                if have is None:
                    unknown.append(f"{name}: neither content nor digest recorded")
                    continue
                if have.lower() != str(exp["sha256"]).lower():
                    problems.append(f"sha256 {have[:12]}... != expected {str(exp['sha256'])[:12]}...")
            if "contains" in exp:
                if content is _UNSET:
                    unknown.append(f"{name}: content not recorded")
                    continue
                if str(exp["contains"]) not in (content if isinstance(content, str) else canonical_text(content)):
                    problems.append(f"does not contain {exp['contains']!r}")
            results[name] = "ok" if not problems else "; ".join(problems)
            failures += [f"{name}: {p}" for p in problems]
        if failures:
            return Verdict.failure("; ".join(failures), artifacts=results)
        if unknown:
            raise MissingEvidence("; ".join(unknown))
        return Verdict.success(f"{len(expected)} artifact(s) as expected", artifacts=results)

    @staticmethod
    def _read(entry: Any) -> tuple[Any, str | None]:
        if not isinstance(entry, dict):
            return entry, None
        digest = entry.get("sha256")
        if "content" in entry:
            return entry["content"], digest
        path = entry.get("path")
        if path and Path(path).is_file():
            data = Path(path).read_bytes()
            try:
                return data.decode("utf-8"), digest or hashlib.sha256(data).hexdigest()
            except UnicodeDecodeError:
                return _UNSET, digest or hashlib.sha256(data).hexdigest()
        return _UNSET, digest


_UNSET: Any = type("_Unset", (), {"__repr__": lambda self: "<unset>"})()


# --------------------------------------------------------------------------- answer
_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and English articles, collapse whitespace."""
    text = _PUNCT.sub(" ", text.lower())
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


class AnswerCheck(Oracle):
    """The agent's final answer against the expected answer."""

    name = "answer_check"
    description = "final answer vs the expected answer (exact, normalized or contains)"

    def __init__(self, *, mode: str = "normalized", expected: str | list[str] | None = None) -> None:
        if mode not in ("exact", "normalized", "contains"):
            raise TypeError(f"mode must be 'exact', 'normalized' or 'contains', got {mode!r}")
        super().__init__(mode=mode, expected=expected)

    def expected(self, sample: Sample) -> list[str]:
        exp = self.params["expected"]
        if exp is None:
            exp = sample.targets or (sample.metadata or {}).get("expected_answer")
        if exp is None:
            return []
        return [str(e) for e in (exp if isinstance(exp, list) else [exp])]

    def missing(self, sample: Sample, generation: Generation | None, context: dict | None) -> list[str]:
        return [] if self.expected(sample) else ["target (or metadata.expected_answer, or the expected parameter)"]

    def verdict(self, sample: Sample, generation: Generation, context: dict) -> Verdict:
        if (generation.metadata or {}).get(META_OUTPUT_MISSING):
            raise MissingEvidence("the episode's final answer was not recorded")
        out = generation.text or ""
        mode = self.params["mode"]
        for e in self.expected(sample):
            if mode == "exact":
                hit = out.strip() == e.strip()
            elif mode == "normalized":
                hit = normalize_answer(out) == normalize_answer(e)
            else:
                ne = normalize_answer(e)
                hit = bool(ne) and f" {ne} " in f" {normalize_answer(out)} "
            if hit:
                return Verdict.success(f"answer matches ({mode})", expected=e)
        return Verdict.failure(f"answer does not match ({mode})" if out else "no final answer",
                               answer=out[:200], expected=self.expected(sample)[:5])


# --------------------------------------------------------------------------- custom predicate
def verdict_from(value: Any) -> Verdict:
    """Read a predicate's return value: bool, None (unknown), a Verdict, a
    status string or a ``{"status", "reason", "evidence"}`` object."""
    if isinstance(value, Verdict):
        return value
    if isinstance(value, bool):
        return Verdict.success() if value else Verdict.failure()
    if value is None:
        return Verdict.unknown("the predicate could not decide (returned None)")
    if isinstance(value, str) and value in {o.value for o in Outcome}:
        return Verdict(status=Outcome(value), reason=f"predicate returned {value!r}")
    if isinstance(value, dict) and value.get("status") in {o.value for o in Outcome}:
        return Verdict.model_validate(value)
    return Verdict.error(f"the predicate returned {type(value).__name__} {value!r}: use bool, None or a Verdict")


class CustomPredicate(Oracle):
    """``predicate(sample, generation, context, **kwargs)`` decides the outcome.

    ``version`` is required: it enters ``identity()`` and the fingerprint, so
    changing the predicate's logic and its version re-scores stored runs."""

    name = "custom_predicate"
    description = "a user predicate (module:function) with a required version"

    def __init__(self, *, predicate: str | None = None, version: str | None = None,
                 kwargs: dict[str, Any] | None = None) -> None:
        from ..agents.matching import load_callable

        if not predicate:
            raise TypeError("custom_predicate needs predicate: 'package.module:function'")
        if not isinstance(version, str) or not version.strip():
            raise TypeError(
                "custom_predicate needs a version string (e.g. version: '2024-06-01' or '1.2'); "
                "it enters the fingerprint so that results change identity when the predicate does"
            )
        self._fn: Callable[..., Any] = load_callable(predicate, "predicate")
        super().__init__(predicate=predicate, version=version, kwargs=dict(kwargs or {}))

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "predicate_version": self.params["version"]}

    def verdict(self, sample: Sample, generation: Generation, context: dict) -> Verdict:
        return verdict_from(self._fn(sample, generation, context, **self.params["kwargs"]))


# --------------------------------------------------------------------------- judge (diagnostic)
_YES = {"complete", "completed", "success", "succeeded", "successful", "pass", "passed", "yes", "true",
        "resolved", "done", "correct"}
_NO = {"incomplete", "not complete", "failure", "failed", "fail", "no", "false", "unresolved", "incorrect",
       "not done"}


def read_judge_verdict(value: Any) -> Verdict:
    if isinstance(value, dict):
        label = next((value[k] for k in ("verdict", "status", "label", "decision") if k in value), None)
        v = read_judge_verdict(label)
        reason = value.get("reason") or value.get("explanation")
        return Verdict(status=v.status, reason=reason or v.reason, evidence={"judge": value})
    if isinstance(value, bool):
        return Verdict.success("judge: complete") if value else Verdict.failure("judge: incomplete")
    if isinstance(value, str):
        label = " ".join(value.strip().lower().replace("_", " ").split()).rstrip(".")
        if label in _YES:
            return Verdict.success(f"judge: {value}")
        if label in _NO:
            return Verdict.failure(f"judge: {value}")
    raise MissingEvidence(f"unrecognised judge verdict {value!r}")


class JudgeAssertion(Oracle):
    """A judge's completion verdict (diagnostic only)."""

    name = "judge_assertion"
    family = "oracle-diagnostic"
    description = "judge's completion verdict (diagnostic; never overrides a verified check)"

    def verdict(self, sample: Sample, generation: Generation, context: dict) -> Verdict:
        meta = generation.metadata or {}
        if meta.get(META_JUDGE) is None:
            raise MissingEvidence("no judge verdict recorded (generation.metadata.judge_verdict)")
        return read_judge_verdict(meta[META_JUDGE])


# --------------------------------------------------------------------------- metrics
class FinalStateCheck(OracleMetric):
    name = "final_state"
    requires = FinalState.requires
    oracle_class = FinalState
    description = FinalState.description


class ArtifactAssertion(OracleMetric):
    name = "artifact_check"
    oracle_class = ArtifactCheck
    description = ArtifactCheck.description


class AnswerAssertion(OracleMetric):
    name = "answer_check"
    oracle_class = AnswerCheck
    description = AnswerCheck.description


class CustomPredicateCheck(OracleMetric):
    name = "custom_predicate"
    oracle_class = CustomPredicate
    description = CustomPredicate.description


class JudgeAssertionCheck(OracleMetric):
    name = "judge_assertion"
    family = "oracle-diagnostic"
    oracle_class = JudgeAssertion
    description = JudgeAssertion.description


class AgentOutcome(Metric):
    """The headline outcome of an agent episode.

    The final-state check when it has evidence (success or failure), else the
    answer check when it has evidence, else ``unknown``. An ``error`` in the
    check that would decide is an error, not a fall-through. The judge's
    verdict is reported alongside as ``<name>.judge`` (diagnostic) and never
    changes the headline; the headline's metadata says whether they agree."""

    name = "agent_outcome"
    direction = Direction.MAXIMIZE
    family = "oracle"
    description = "headline outcome: final-state check, else answer check, else unknown; judge reported alongside"

    def __init__(
        self, *, state_mode: str = "subset", answer_mode: str = "normalized", as_name: str | None = None
    ) -> None:
        self.state = FinalState(mode=state_mode)
        self.answer = AnswerCheck(mode=answer_mode)
        self.judge = JudgeAssertion()
        super().__init__(state_mode=state_mode, answer_mode=answer_mode, as_name=as_name)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "oracles": [o.identity() for o in (self.state, self.answer, self.judge)]}

    def headline(
        self, sample: Sample, generation: Generation, context: dict
    ) -> tuple[Verdict, str | None, dict[str, Any]]:
        checks: dict[str, Any] = {}
        unresolved: list[str] = []
        for source, oracle in (("state", self.state), ("answer", self.answer)):
            missing = oracle.missing(sample, generation, context)
            if missing:
                checks[source] = {"status": "not_tested", "reason": f"missing {', '.join(missing)}"}
                continue
            v = oracle.check(sample, generation, context)
            checks[source] = {"status": v.status.value, "reason": v.reason}
            if v.decided or v.status is Outcome.ERROR:
                return v, source, checks
            unresolved.append(f"{source}: {v.reason}")
        why = "; ".join(unresolved) or "the sample has neither an expected state nor an expected answer"
        return Verdict.unknown(f"no verified outcome ({why})"), None, checks

    def score(self, sample: Sample, generation: Generation, context: dict) -> dict[str, Score]:
        verdict, source, checks = self.headline(sample, generation, context or {})
        meta: dict[str, Any] = {"headline_source": source, "checks": checks}
        judge: Score | None = None
        if (generation.metadata or {}).get(META_JUDGE) is not None:
            jv = self.judge.check(sample, generation, context or {})
            meta["judge"] = jv.status.value
            if jv.decided and verdict.decided:
                meta["judge_agrees"] = jv.status is verdict.status
            judge = jv.to_score("judge", diagnostic=True, headline=False)
        out: dict[str, Score] = {self.output_name: verdict.to_score(self.output_name, **meta)}
        if judge is not None:
            out["judge"] = judge
        return out
