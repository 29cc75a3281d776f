"""A judge is a backend + a prompt + a parser, exposed as a Metric.

``JudgeMetric`` subclasses (family ``"judge"``) take the judge backend as a
parameter, a backend spec mapping like a run's ``model`` (``type: api`` for
any OpenAI-compatible server, ``type: hf`` for a local checkpoint; any
backend type validates)::

    metrics:
      - name: factual_correctness
        params:
          judge: {type: api, base_url: "https://api.openai.com/v1", model: gpt-4o-mini,
                  api_key: "${OPENAI_API_KEY}"}
          generation: {max_new_tokens: 8}

The backend is created and loaded lazily, once per metric instance (so once
per scoring actor), on the first ``score_batch``; all requests of a batch go
to it in one ``generate`` call (the api backend sends them concurrently, with
its retries, rate limit and cache). ``${VAR}`` in the judge mapping is
expanded from the environment when the backend loads: the metric's
parameters, and so its identity, results and fingerprint, keep the ``${VAR}``
text, never the value (and secret-looking keys are dropped from fingerprints
and masked in results anyway).

Verdicts: a reply that parses gives ``scored``; a reply that does not parse
gives ``unknown`` with the reason (never 0); a judge request that failed
(transport, HTTP error, malformed body) gives ``error`` with the message.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ..core.metric import Direction, Metric
from ..core.types import Generation, Sample, Score
from ..errors import ConfigError


class JudgeReplyError(Exception):
    """The judge's reply does not parse: the score is ``unknown``."""


def _render(template: str, fields: dict[str, Any]) -> str:
    """``{name}`` placeholders; unknown names are left as written (braces in
    answers or contexts are never interpreted)."""

    def sub(m: re.Match) -> str:
        key = m.group(1)
        return str(fields[key]) if key in fields else m.group(0)

    return re.sub(r"\{([a-z_]+)\}", sub, template)


def input_text(sample: Sample) -> str:
    if isinstance(sample.input, str):
        return sample.input
    return "\n".join(f"{m.role}: {_content_text(m.content)}" for m in sample.input)


def _content_text(content: Any) -> str:
    """A message's content as text; of content parts, the text parts, an image as ``[image]``."""
    if not isinstance(content, list):
        return content or ""
    return " ".join(p.text or "" if p.type == "text" else "[image]" for p in content)


def reply_of(gen: Generation) -> str:
    return gen.text if gen.text else (gen.raw_text or "")


_ADAPTER: dict[str, Any] = {}


def backend_adapter() -> Any:
    """A pydantic TypeAdapter over every registered backend's settings (built
    again when the registry changes)."""
    from ..core.backends import registry_version, settings_union

    version = registry_version()
    if _ADAPTER.get("version") != version:
        from pydantic import TypeAdapter

        _ADAPTER.update(version=version, adapter=TypeAdapter(settings_union()))
    return _ADAPTER["adapter"]


class JudgeMetric(Metric, abstract=True):
    """Base of judged metrics. Subclasses define ``template`` and ``verdict``
    (or override ``judge_items``)."""

    family: ClassVar[str] = "judge"
    direction: ClassVar[Direction] = Direction.MAXIMIZE
    #: the default prompt; ``{input}``, ``{output}``, ``{target}``, ``{contexts}`` ...
    template: ClassVar[str] = ""
    #: default judge generation settings (merged under ``params["generation"]``)
    default_generation: ClassVar[dict[str, Any]] = {"max_new_tokens": 16, "temperature": 0.0}

    def __init__(self, judge: dict[str, Any] | None = None, generation: dict[str, Any] | None = None,
                 prompt: str | None = None, seed: int = 0, **params: Any) -> None:
        if judge is None:
            raise ConfigError(f"metric {self.name!r}: params.judge is required: a backend mapping such as "
                              "{type: api, base_url: ..., model: ..., api_key: ${VAR}} or {type: hf, path: ...}")
        if not isinstance(judge, dict) or "type" not in judge:
            raise ConfigError(f"metric {self.name!r}: params.judge must be a backend mapping with a 'type'")
        self.judge_config = dict(judge)
        self.generation_config = {**self.default_generation, **(generation or {})}
        self.prompt_template = prompt or self.template
        self.judge_seed = seed
        super().__init__(judge=judge, generation=generation, prompt=prompt, seed=seed, **params)
        self._spec = self._validate(self.judge_config)  # fails at config time on a bad mapping
        self._settings = self._settings_model(self.generation_config)
        self._backend: Any = None

    # ------------------------------------------------------------------ config
    def _validate(self, config: dict[str, Any]) -> Any:
        from pydantic import ValidationError

        try:
            return backend_adapter().validate_python(config)
        except ValidationError as exc:
            first = exc.errors()[0]
            parts = list(first["loc"])
            if parts and parts[0] == config.get("type"):
                parts = parts[1:]  # the union's tag
            loc = ".".join(str(p) for p in parts)
            raise ConfigError(f"metric {self.name!r}: params.judge.{loc}: {first['msg']}") from None

    def _settings_model(self, config: dict[str, Any]) -> Any:
        from pydantic import ValidationError

        from ..config.models import GenerationSettings

        try:
            return GenerationSettings.model_validate(config)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(map(str, first["loc"]))
            raise ConfigError(f"metric {self.name!r}: params.generation.{loc}: {first['msg']}") from None

    def identity(self) -> dict[str, Any]:
        from ..core.secrets import redact

        ident = super().identity()
        ident["params"] = redact(ident["params"])  # results carry identities: mask any key written in clear
        from ..sources import pinned

        ident["judge_backend"] = {"type": self._spec.type, **pinned(self._spec).settings.settings_identity()}
        return ident

    # ------------------------------------------------------------------ backend
    @property
    def backend(self) -> Any:
        """The judge backend, created and loaded on first use (once per instance)."""
        if self._backend is None:
            from ..core.backends import create_backend

            spec = self._spec
            if "${" in str(self.judge_config):
                from ..core.envvars import expand_env

                spec = self._validate(expand_env(self.judge_config, ("judge",)))
            from ..sources import materialize, pinned

            backend = create_backend(materialize(pinned(spec).settings), self._settings, self.judge_seed)
            backend.load()
            self._backend = backend
        return self._backend

    def ask(self, requests: list[Any], settings: Any = None) -> list[Generation]:
        """Send judge requests in one batch (settings: this call's generation settings)."""
        if not requests:
            return []
        b = self.backend
        b.generation = settings or self._settings
        try:
            return b.generate(requests)
        finally:
            b.generation = self._settings

    @property
    def logprobs_available(self) -> bool:
        return self._spec.supports_logprobs()

    # ------------------------------------------------------------------ helpers
    def fields(self, sample: Sample, generation: Generation, context: dict) -> dict[str, Any]:
        targets = sample.targets
        return {
            "input": input_text(sample),
            "output": self.prediction(generation, context),
            "target": targets[0] if targets else "",
            "targets": "\n".join(targets),
        }

    def render(self, **fields: Any) -> str:
        return _render(self.prompt_template, fields)

    @staticmethod
    def request_id(sample: Sample, context: dict) -> tuple[str, int]:
        return sample.id, int((context or {}).get("repeat") or 0)

    def error_score(self, gen: Generation, **meta: Any) -> Score:
        return Score.error(self.output_name, f"judge request failed: {gen.error}", metadata=meta)

    def score(self, sample: Sample, generation: Generation, context: dict) -> Score | dict[str, Score]:
        result = self.score_batch([(sample, generation, context)])[0]
        if isinstance(result, Exception):
            raise result
        return result

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_backend"] = None  # a loaded backend never travels
        return state
