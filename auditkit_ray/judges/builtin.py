"""Built-in judged metrics (family ``"judge"``): ``g_eval``,
``factual_correctness``, ``grounding``.

Their names differ from every lexical metric's, so a judged and a
deterministic score never share a column.
"""

from __future__ import annotations

from statistics import mean
from typing import Any, ClassVar

from ..backends.base import Request
from ..core.metric import MissingEvidence
from ..core.types import Generation, Sample, Score
from ..errors import ConfigError
from .base import JudgeMetric, JudgeReplyError, reply_of
from .parsers import parse_score, parse_yes_no, split_claims, weighted_score

Item = tuple[Sample, Generation, dict]


def _reply_meta(gen: Generation) -> dict[str, Any]:
    return {"reply": reply_of(gen)[:300]}


# --------------------------------------------------------------------------- G-Eval
class GEval(JudgeMetric):
    """G-Eval: a 1-5 rating on a criterion, probability-weighted over the
    judge's top log-probabilities of the score token when the backend returns
    them (the api backend asks for ``logprobs``/``top_logprobs``), else the
    mean of ``samples`` sampled ratings. ``Score.metadata["method"]`` says
    which (``logprobs`` or ``sampling``)."""

    name = "g_eval"
    description = "judge: G-Eval rating on a criterion (probability-weighted from logprobs, else mean of samples)"
    template: ClassVar[str] = (
        "You will be given an input and a response to it. Rate the response on one criterion.\n\n"
        "Evaluation criterion:\n{criteria}\n\n"
        "Evaluation steps:\n{steps}\n\n"
        "Input:\n{input}\n\n"
        "Response:\n{output}\n\n"
        "Rate the response from {min_score} to {max_score}. Reply with the number only.\n"
        "Score ({min_score}-{max_score}):"
    )
    default_generation: ClassVar[dict[str, Any]] = {"max_new_tokens": 4, "temperature": 0.0}
    DEFAULT_CRITERIA = "Overall quality: the response is correct, relevant to the input, and coherent."
    DEFAULT_STEPS = ("Read the input and the response.", "Check the response against the criterion.",
                     "Assign a score on the scale.")

    def __init__(self, criteria: str | None = None, steps: list[str] | None = None, min_score: int = 1,
                 max_score: int = 5, samples: int = 5, sample_temperature: float = 1.0, top_logprobs: int = 5,
                 **params: Any) -> None:
        if not (isinstance(min_score, int) and isinstance(max_score, int) and 0 <= min_score < max_score <= 9):
            raise ConfigError("g_eval: min_score < max_score must be single-digit integers (score tokens are digits)")
        if samples < 1:
            raise ConfigError("g_eval: samples must be at least 1")
        self.criteria = criteria or self.DEFAULT_CRITERIA
        self.steps = list(steps or self.DEFAULT_STEPS)
        self.lo, self.hi = min_score, max_score
        self.samples = samples
        self.sample_temperature = sample_temperature
        self.top_k = top_logprobs
        extra = {k: v for k, v in {"criteria": criteria, "steps": steps}.items() if v is not None}
        if (min_score, max_score) != (1, 5):
            extra.update(min_score=min_score, max_score=max_score)
        if samples != 5:
            extra["samples"] = samples
        if sample_temperature != 1.0:
            extra["sample_temperature"] = sample_temperature
        if top_logprobs != 5:
            extra["top_logprobs"] = top_logprobs
        super().__init__(**params, **extra)

    def _prompt(self, sample: Sample, gen: Generation, ctx: dict) -> str:
        steps = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(self.steps))
        return self.render(**self.fields(sample, gen, ctx), criteria=self.criteria, steps=steps,
                           min_score=self.lo, max_score=self.hi)

    def score_batch(self, items: list[Item]) -> list[Score]:
        prompts = [self._prompt(*it) for it in items]
        out: list[Score | None] = [None] * len(items)
        fallback = list(range(len(items)))
        if self.logprobs_available:
            reqs = []
            for (s, _, c), p in zip(items, prompts):
                sid, rep = self.request_id(s, c)
                reqs.append(Request(sample_id=sid, prompt=p, repeat=rep, metadata={"top_logprobs": self.top_k}))
            fallback = []
            for i, gen in enumerate(self.ask(reqs)):
                if gen.error:
                    out[i] = self.error_score(gen, method="logprobs")
                    continue
                steps = gen.metadata.get("logprobs")
                if not steps:
                    fallback.append(i)  # the server ignored the logprobs request
                    continue
                try:
                    value, probs = weighted_score(steps, self.lo, self.hi)
                except JudgeReplyError as exc:
                    out[i] = Score.unknown(
                        self.output_name, str(exc), metadata={"method": "logprobs", **_reply_meta(gen)}
                    )
                    continue
                out[i] = Score.scored(self.output_name, value, metadata={
                    "method": "logprobs", "probs": {str(k): p for k, p in probs.items()}, **_reply_meta(gen)})
        if fallback:
            self._sampling(items, prompts, fallback, out)
        return [o if o is not None else Score.error(self.output_name, "no judge verdict") for o in out]

    def _sampling(self, items: list[Item], prompts: list[str], todo: list[int], out: list[Score | None]) -> None:
        n = self.samples
        settings = self._settings
        if n > 1:
            settings = settings.model_copy(update={"temperature": self.sample_temperature})
        reqs = []
        for i in todo:
            sid, rep = self.request_id(items[i][0], items[i][2])
            reqs += [Request(sample_id=sid, prompt=prompts[i], repeat=rep * n + j) for j in range(n)]
        gens = self.ask(reqs, settings)
        for k, i in enumerate(todo):
            mine = gens[k * n:(k + 1) * n]
            values, unparsed, errors = [], [], []
            for g in mine:
                if g.error:
                    errors.append(g.error)
                    continue
                try:
                    values.append(parse_score(reply_of(g), self.lo, self.hi))
                except JudgeReplyError as exc:
                    unparsed.append(str(exc))
            meta = {"method": "sampling", "n": n, "parsed": len(values), "values": values,
                    "temperature": settings.temperature}
            if values:
                meta.update(unparsed=len(unparsed), errors=len(errors))
                out[i] = Score.scored(self.output_name, mean(values), metadata=meta)
            elif unparsed:
                out[i] = Score.unknown(
                    self.output_name, f"none of {n} judge replies parsed; first: {unparsed[0]}", metadata=meta
                )
            else:
                out[i] = Score.error(self.output_name, f"judge request failed: {errors[0]}", metadata=meta)


# --------------------------------------------------------------------------- factual correctness
class FactualCorrectness(JudgeMetric):
    """Yes/no: is the response factually correct (against the reference when
    the sample has one)? 1 for yes, 0 for no, ``unknown`` when the verdict
    does not parse."""

    name = "factual_correctness"
    description = "judge: is the response factually correct (yes/no), against the reference when given"
    template: ClassVar[str] = (
        "You are checking whether a response is factually correct.\n\n"
        "Question:\n{input}\n\n"
        "{reference_block}"
        "Response:\n{output}\n\n"
        "Is the response factually correct{reference_clause}? Answer with one word: yes or no.\n"
        "Answer:"
    )
    default_generation: ClassVar[dict[str, Any]] = {"max_new_tokens": 4, "temperature": 0.0}

    def score_batch(self, items: list[Item]) -> list[Score]:
        reqs = []
        for s, g, c in items:
            f = self.fields(s, g, c)
            has_ref = bool(s.targets)
            prompt = self.render(**f, reference_block=f"Reference answer:\n{f['targets']}\n\n" if has_ref else "",
                                 reference_clause=" given the reference answer" if has_ref else "")
            sid, rep = self.request_id(s, c)
            reqs.append(Request(sample_id=sid, prompt=prompt, repeat=rep))
        out = []
        for gen in self.ask(reqs):
            if gen.error:
                out.append(self.error_score(gen))
                continue
            try:
                yes = parse_yes_no(reply_of(gen))
            except JudgeReplyError as exc:
                out.append(Score.unknown(self.output_name, str(exc), metadata=_reply_meta(gen)))
                continue
            out.append(Score.scored(self.output_name, 1.0 if yes else 0.0,
                                    metadata={"verdict": "yes" if yes else "no", **_reply_meta(gen)}))
        return out


# --------------------------------------------------------------------------- grounding
class Grounding(JudgeMetric):
    """Claim-level grounding for RAG: the answer is split into sentences
    (claims); the judge says for each whether the retrieved contexts support
    it. The value is the share of supported claims. A claim whose verdict does
    not parse makes the sample ``unknown`` (a partial count would be a guess);
    a failed judge request makes it ``error``."""

    name = "grounding"
    requires = ("retrieved_contexts",)
    description = "judge: share of the answer's claims supported by the retrieved contexts"
    template: ClassVar[str] = (
        "Context:\n{contexts}\n\n"
        "Claim:\n{claim}\n\n"
        "Is the claim fully supported by the context above? Answer with one word: yes or no.\n"
        "Answer:"
    )
    default_generation: ClassVar[dict[str, Any]] = {"max_new_tokens": 4, "temperature": 0.0}

    def __init__(self, max_claims: int = 20, **params: Any) -> None:
        self.max_claims = max_claims
        super().__init__(**params, **({"max_claims": max_claims} if max_claims != 20 else {}))

    @staticmethod
    def _contexts(sample: Sample) -> str:
        texts = []
        for i, c in enumerate(sample.retrieved_contexts or []):
            text = c.get("text") if isinstance(c, dict) else None
            if text:
                texts.append(f"[{i + 1}] {text}")
        if not texts:
            raise MissingEvidence("the retrieved contexts carry no text to ground the answer in")
        return "\n\n".join(texts)

    def score_batch(self, items: list[Item]) -> list[Score | Exception]:
        plan: list[tuple[int, list[str], bool] | Score | Exception] = []
        reqs: list[Request] = []
        for s, g, c in items:
            try:
                contexts = self._contexts(s)
            except MissingEvidence as exc:
                plan.append(exc)
                continue
            claims, cut = split_claims(self.prediction(g, c), self.max_claims)
            if not claims:
                plan.append(MissingEvidence("the answer states no claim to ground"))
                continue
            sid, rep = self.request_id(s, c)
            start = len(reqs)
            for j, claim in enumerate(claims):
                reqs.append(
                    Request(sample_id=f"{sid}#claim{j}", prompt=self.render(contexts=contexts, claim=claim), repeat=rep)
                )
            plan.append((start, claims, cut))
        gens = self.ask(reqs)
        out: list[Score | Exception] = []
        for entry in plan:
            if not isinstance(entry, tuple):
                out.append(entry)
                continue
            start, claims, cut = entry
            verdicts: list[dict[str, Any]] = []
            failed = unparsed = None
            for j, claim in enumerate(claims):
                gen = gens[start + j]
                if gen.error:
                    failed = failed or f"claim {j + 1}: {gen.error}"
                    verdicts.append({"claim": claim, "supported": None})
                    continue
                try:
                    verdicts.append({"claim": claim, "supported": parse_yes_no(reply_of(gen))})
                except JudgeReplyError as exc:
                    unparsed = unparsed or f"claim {j + 1}: {exc}"
                    verdicts.append({"claim": claim, "supported": None, "reply": reply_of(gen)[:200]})
            meta = {"claims": verdicts, "total": len(claims), "truncated": cut}
            if failed:
                out.append(Score.error(self.output_name, f"judge request failed: {failed}", metadata=meta))
            elif unparsed:
                out.append(Score.unknown(self.output_name, unparsed, metadata=meta))
            else:
                supported = sum(1 for v in verdicts if v["supported"])
                out.append(
                    Score.scored(self.output_name, supported / len(claims), metadata={**meta, "supported": supported})
                )
        return out
