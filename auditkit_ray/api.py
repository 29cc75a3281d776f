"""The public functions: every operation of the ``auditkit-ray`` command, callable from Python.

``auditkit_ray`` re-exports them and the CLI calls nothing else. Each one is a
thin call into the engine modules, imported inside the function, so that
``import auditkit_ray`` stays light (no Ray, pyarrow, numpy or SDK loads).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .errors import AuditKitError, ConfigError
from .init_templates import RUN_FILE as STARTER_RUN_FILE
from .init_templates import SWEEP_FILE as STARTER_SWEEP_FILE

if TYPE_CHECKING:
    from .compare import Comparison, Leaderboard
    from .config.models import RunSpec, SweepSpec
    from .core.result import RunResult
    from .pipeline.sweep import SweepResult
    from .report.browse import ResultsBrowser
    from .report.loader import Report
    from .store.db import ExperimentDB
    from .store.interface import ResultStore

#: the formats ``render_report`` writes
REPORT_FORMATS = ("text", "md", "junit", "html", "json", "badge")

__all__ = [
    "REPORT_FORMATS", "STARTER_RUN_FILE", "STARTER_SWEEP_FILE", "SweepPlan", "Validation", "as_run_spec",
    "build_report", "compare", "decide", "decision_rule", "evaluate", "evaluate_many", "experiment_db", "format_run",
    "generate", "init_project", "k8s_dump", "k8s_render", "k8s_submit", "leaderboard", "list_metrics", "lmeval",
    "load_config", "load_run", "load_sweep", "open_store", "parse_assignments", "parse_max_regression", "query_runs",
    "render_report", "rescore", "rescore_spec", "resolve_report_input", "resolve_run", "results_browser",
    "run_fingerprint", "samples_table", "schema", "scrub_secrets", "shard_status", "show_run", "sweep", "sweep_plan",
    "sync_runs", "use_color", "validate", "cell_start_status", "cluster_up", "cluster_down", "cluster_status",
    "evict", "prefer_warm_cluster", "prefer_resident", "error_text",
]


# ----------------------------------------------------------------------------- configuration
def load_config(path: str | os.PathLike) -> RunSpec | SweepSpec:
    """Load and validate a run or sweep file (a sweep is expanded once, so every run it makes is checked)."""
    from .config import load_config as _load

    return _load(path)


def as_run_spec(spec: Any, *, overrides: Sequence[str] | None = None, limit: int | None = None) -> RunSpec:
    """A RunSpec from a RunSpec, a dict in the run-file format, or a path to a run file. A file's
    ``overrides`` (``["generation.temperature=0.7", ...]``, the CLI's ``--set``) and ``limit`` (the first
    N samples, ``dataset.limit``) apply as if the file held them: they enter the fingerprint the same way."""
    from .config.loader import load_run_spec, parse_overrides, run_spec_from_dict
    from .config.models import RunSpec

    sets = parse_overrides(list(overrides or []))
    if limit is not None:
        if limit < 1:
            raise ConfigError(f"--limit {limit}: give a positive number of samples")
        sets.append(("dataset.limit", int(limit)))
    if sets and not isinstance(spec, (str, os.PathLike)):
        raise ConfigError("overrides and limit apply to a run file")
    if isinstance(spec, RunSpec):
        return spec
    if isinstance(spec, dict):
        return run_spec_from_dict(spec, "<dict>")
    if isinstance(spec, (str, os.PathLike)):
        return load_run_spec(spec, sets)
    raise ConfigError(f"expected a RunSpec, a dict or a path to a run file, not {type(spec).__name__}")


def run_fingerprint(spec: Any) -> str:
    """The fingerprint of a run (a RunSpec, a dict or a run file): the key its results are stored under."""
    from .pipeline.identity import run_fingerprint as _fp

    return _fp(as_run_spec(spec))


@dataclass
class Validation:
    """What ``validate`` found in a run or sweep file."""

    kind: str  # "run" or "sweep"
    name: str
    #: a run's fingerprint, backend type and number of metrics
    fingerprint: str | None = None
    backend: str | None = None
    metrics: int = 0
    #: a sweep's runs: (name, fingerprint)
    runs: list[tuple[str, str]] = field(default_factory=list)
    #: the datasets read (``read_data``): (where, samples), each once
    datasets: list[tuple[str, int]] = field(default_factory=list)


def validate(path: str | os.PathLike, *, read_data: bool = True, overrides: Sequence[str] | None = None,
             limit: int | None = None) -> Validation:
    """Check a run or sweep file; a run's fingerprint, or each run of a sweep with its fingerprint.
    ``read_data``: also read each dataset and build every prompt, as the run will (a missing, empty or
    truncated dataset, a duplicate id, invalid UTF-8 or a sample the prompt cannot be built from fails
    here); ``False`` checks the file alone (for very large datasets). ``overrides``/``limit``: a run
    file's, as ``as_run_spec`` applies them."""
    from .config import RunSpec, expand, load_config_runs
    from .core.gcpause import gc_paused
    from .pipeline.identity import identities_shared
    from .pipeline.identity import run_fingerprint as _fp

    lines = None
    if _is_sweep_file(path) and (overrides or limit is not None):
        spec = load_sweep(path, overrides=overrides, limit=limit)[0]
        runs = expand(spec, source=str(path))
    elif overrides or limit is not None:
        spec = as_run_spec(path, overrides=overrides, limit=limit)
        runs = [spec]
    else:
        spec, runs, lines = load_config_runs(path)  # a sweep expanded once
    with _naming(path, spec, lines, "model.path"):
        _check_models(runs, sweep=not isinstance(spec, RunSpec))
    datasets: dict[str, tuple[str, int]] = {}
    if read_data:
        from .pipeline.plan import check_dataset

        for r in runs:
            key = r.dataset.model_dump_json() + "\0" + r.prompt.model_dump_json()
            if key not in datasets:
                with _naming(path, spec, lines, "dataset.path"):
                    datasets[key] = (r.dataset.path or r.dataset.hub, check_dataset(r))
    from .pipeline.plan import check_corpus

    corpora: set[str] = set()
    for r in runs:  # read with the data; without, a corpus that is no file is still refused (never hashed)
        corpus = r.retrieval.corpus if r.retrieval is not None else None
        if corpus and corpus not in corpora and (read_data or ("://" not in corpus and not Path(corpus).is_file())):
            with _naming(path, spec, lines, "retrieval.corpus"):
                check_corpus(r)
            corpora.add(corpus)
    where = list(datasets.values())
    with _naming(path, spec, lines, None):
        if isinstance(spec, RunSpec):
            return Validation("run", spec.name, fingerprint=_fp(spec), backend=spec.model.type,
                              metrics=len(spec.metrics), datasets=where)
        # a sweep's runs mostly read one dataset: its identity is worked out once; and the collector, which would
        # walk every run made so far at each collection, waits
        with identities_shared(), gc_paused():
            return Validation("sweep", spec.name, runs=[(r.name, _fp(r)) for r in runs], datasets=where)


def _is_sweep_file(path: Any) -> bool:
    from .config.loader import is_sweep, read_document

    return isinstance(path, (str, os.PathLike)) and is_sweep(read_document(path)[0])


@contextmanager
def _naming(path: Any, spec: Any, lines: Any, setting: str | None) -> Iterator[None]:
    """An error from checking what a file names (its data, its checkpoint, its fingerprint) names the file
    first, and the line of the setting where there is one; long paths in it shortened."""
    from .config.loader import setting_line
    from .config.models import RunSpec
    from .core.shown import shorten_tokens

    try:
        yield
    except AuditKitError as exc:
        text = shorten_tokens(str(exc))
        named = re.match(r"([a-z_]+(?:\.[a-z_]+)+)[ :]", text)  # the error names its own setting: that one's line
        if named and named.group(1).split(".")[0] in RunSpec.model_fields:
            setting = named.group(1)
        line = setting_line(spec, lines, setting) if setting else None
        about = f"{setting}: " if setting and setting not in text else ""
        exc.args = (f"{path}{f':{line}' if line else ''}: {about}{text}",)
        raise exc.with_traceback(None) from None


@contextmanager
def naming_file(path: Any, spec: Any) -> Iterator[None]:
    """For a command that runs a file (``run``, ``generate``): a dataset's error names the configuration file and
    its ``dataset.path`` line first, as ``validate`` says it."""
    from .errors import DataError

    try:
        yield
    except DataError as exc:
        if not isinstance(path, (str, os.PathLike)) or str(exc).startswith(f"{path}:"):
            raise
        from .config.loader import read_document

        try:
            lines = read_document(path)[1]
        except AuditKitError:
            lines = None
        with _naming(path, spec, lines, "dataset.path"):
            raise exc.with_traceback(None) from None


def stopped_by_down() -> bool:
    """Whether ``auditkit-ray down`` is stopping the warm cluster this process uses (and interrupting it)."""
    from .pipeline.runtime import stopped_by_down as stopped

    return stopped()


def _check_models(runs: list[Any], *, sweep: bool) -> None:
    """Each run's checkpoint is there (a local directory with config.json) or can be pinned (a Hub id, an
    ``s3://`` prefix): one ModelSourceError naming the runs whose is not (a sweep would fail those cells): the
    first reason in full, the next shortened, each with two of its runs, and how many runs more."""
    from .core.shown import clip
    from .errors import ModelSourceError
    from .pipeline.plan import model_problem

    pins: dict[tuple, str] = {}
    found: dict[str, str | None] = {}  # by model settings: a sweep's runs share a few checkpoints

    def problem(r: Any) -> str | None:
        key = r.model.model_dump_json()
        if key not in found:
            found[key] = model_problem(r, pins)[1]
        return found[key]

    problems = [(r.name, why) for r in runs if (why := problem(r)) is not None]
    if not problems:
        return
    if not sweep:
        raise ModelSourceError(problems[0][1])
    by_reason: dict[str, list[str]] = {}
    for name, why in problems:
        by_reason.setdefault(why, []).append(name)

    def runs_named(names: list[str]) -> str:
        more = f" and {len(names) - 2:,} more" if len(names) > 2 else ""
        return f"run{'s' if len(names) > 1 else ''} {', '.join(names[:2])}{more}"

    (why, names), *others = by_reason.items()
    text = f"{why} ({runs_named(names)})"
    if others:  # the next reason shortened, the rest counted: one line of a few hundred characters
        also, also_names = others[0]
        text += f"; also {clip(also, 100)} ({runs_named(also_names)})"
        rest = sum(len(n) for _, n in others[1:])
        text += f"; and {rest:,} more run{'s' if rest > 1 else ''} for other reasons" if rest else ""
    raise ModelSourceError(f"{len(problems):,} of {len(runs):,} runs have no checkpoint to load (the sweep "
                           f"would fail their cells): {text}")


def schema(kind: str = "run") -> dict[str, Any]:
    """The JSON Schema of run files (``kind="run"``) or sweep files (``"sweep"``)."""
    from .config import json_schema

    return json_schema(kind)


def list_metrics() -> list[dict[str, Any]]:
    """The built-in metrics: name, direction, family, requirements and description of each."""
    from .core.metric import metric_info
    from .core.registry import builtin_names, resolve_metric

    return [metric_info(resolve_metric(n)) | {"name": n} for n in builtin_names()]


def scrub_secrets(text: str) -> str:
    """``text`` with anything that looks like a credential masked (for messages shown to a user)."""
    from .core.secrets import scrub_text

    return scrub_text(text)


def error_text(text: str) -> str:
    """An error message as a terminal may show it: credentials masked, control characters escaped (a value
    quoted from a file never drives the terminal), a path or value of hundreds of characters shortened."""
    from .core.shown import shorten_tokens, terminal_safe

    return terminal_safe(shorten_tokens(scrub_secrets(text)))


# ----------------------------------------------------------------------------- running
def evaluate(spec: Any, *, address: str | None = None, progress: bool = False, store: str | None = None) -> RunResult:
    """Evaluate one run on Ray and return its RunResult.

    Ray starts locally in-process unless ``address`` (or ``RAY_ADDRESS``) names
    a cluster, or Ray is already initialised. Finished shards already in the
    result store are reused (resume); stored generations are reused when only
    the scoring changed. ``store`` overrides the run's ``store.path``.
    """
    from .pipeline.driver import evaluate_spec

    run = as_run_spec(spec)
    if store:
        run = run.model_copy(update={"store": run.store.model_copy(update={"path": store})})
    return evaluate_spec(run, address=address, progress=progress)


def evaluate_many(base: Any, datasets: list[Any], *, address: str | None = None,
                  progress: bool = False) -> list[RunResult]:
    """One model over several datasets, loading the model once per generation
    actor: each dataset (a path or a ``dataset`` mapping, optionally with its
    own ``prompt``/``metrics``/``name`` under the keys of a run file) becomes a
    run of its own, and all of them share one pipeline."""
    from .config.loader import run_spec_from_dict
    from .config.sweep import deep_merge
    from .pipeline.driver import evaluate_specs

    run = as_run_spec(base)
    data = run.model_dump(mode="json", by_alias=True)
    specs = []
    for i, d in enumerate(datasets):
        if isinstance(d, (str, os.PathLike)):
            d = {"dataset": {**data["dataset"], "path": str(d), "hub": None, "config": None, "revision": None}}
        elif isinstance(d, dict) and "dataset" not in d:
            d = {"dataset": {**data["dataset"], **d}}
        over = dict(d)
        source = over["dataset"].get("path") or over["dataset"].get("hub") or str(i)
        over.setdefault("name", f"{run.name}/{Path(source).stem}")
        specs.append(run_spec_from_dict(deep_merge(data, over), f"<evaluate_many dataset {i}>"))
    return evaluate_specs(specs, address=address, progress=progress)


def generate(spec: Any, *, address: str | None = None, progress: bool = False, store: str | None = None) -> RunResult:
    """Generate and store a run's outputs without scoring them (re-score them later with ``rescore``)."""
    run = as_run_spec(spec).model_copy(update={"metrics": [], "annotators": []})
    return evaluate(run, address=address, progress=progress, store=store)


def rescore_spec(run: str | os.PathLike, metrics: Sequence[str] | None = None,
                 config: str | os.PathLike | None = None) -> RunSpec:
    """A run spec that scores a stored run's outputs again (the ``precomputed``
    backend): with the named ``metrics``, or the metrics and annotators of the
    run file ``config``."""
    from .config import load_run_spec, run_spec_from_dict
    from .core.result import load_run as _load_run

    p = Path(resolve_run(run))
    run_dir = p.parent if p.name == "result.json" else p
    result = _load_run(run_dir)
    data = dict(result.config)
    data["model"] = {"type": "precomputed", "path": str(run_dir)}
    data["name"] = f"{result.name}/rescored"
    if run_dir.parent.name == "runs":
        data.setdefault("store", {})["path"] = str(run_dir.parent.parent)
    if config:
        other = load_run_spec(config)
        data["metrics"] = [m.model_dump(mode="json", by_alias=True, exclude_none=True) for m in other.metrics]
        data["annotators"] = [a.model_dump(mode="json") for a in other.annotators]
    if metrics:  # NAME, or NAME@ANNOTATION as results name a metric on an annotation (exact_match@number)
        data["metrics"] = [dict(zip(("name", "on"), m.split("@", 1))) for m in metrics]
    if not data.get("metrics"):
        raise ConfigError("rescore: give --metric NAME (repeatable) or --config FILE with metrics")
    return run_spec_from_dict(data, f"<rescore {run_dir}>")


def rescore(run: str | os.PathLike, *, metrics: Sequence[str] | None = None, config: str | os.PathLike | None = None,
            address: str | None = None, progress: bool = False) -> RunResult:
    """Score a stored run's outputs again with other metrics (no model, no GPU)."""
    return evaluate(rescore_spec(run, metrics, config), address=address, progress=progress)


def load_sweep(spec: Any, *, store: str | None = None, overrides: Sequence[str] | None = None,
               limit: int | None = None) -> tuple[SweepSpec, str, Any]:
    """``(sweep, source, lines)`` from a SweepSpec, a dict or a sweep file
    (``lines`` maps config paths to file lines for messages); ``store``
    overrides the base run's ``store.path``; ``overrides`` (``--set KEY=VALUE``) and ``limit`` (the first N
    samples of every run) apply to the base as if the file held them (a grid key that sets the same field wins),
    so they enter every run's fingerprint."""
    from pydantic import ValidationError

    from .config import load_sweep_spec
    from .config.loader import parse_overrides, read_document
    from .config.models import SweepSpec
    from .config.sweep import set_path

    if isinstance(spec, SweepSpec):
        sweep, source, lines = spec.model_copy(deep=True), "<sweep>", None
    elif isinstance(spec, dict):
        try:
            sweep, source, lines = SweepSpec.model_validate(spec), "<dict>", None
        except ValidationError as exc:
            raise ConfigError(f"<dict>: invalid sweep: {exc}") from None
    elif isinstance(spec, (str, os.PathLike)):
        sweep, source = load_sweep_spec(spec), str(spec)
        _, lines = read_document(spec)
    else:
        raise ConfigError(f"expected a SweepSpec, a dict or a path to a sweep file, not {type(spec).__name__}")
    if store:
        sweep.base.setdefault("store", {})["path"] = store
    sets = parse_overrides(list(overrides or []))
    flags = [f"--set {k}" for k, _ in sets]
    if limit is not None:
        if limit < 1:
            raise ConfigError(f"--limit {limit}: give a positive number of samples")
        sets.append(("dataset.limit", int(limit)))
        flags.append("--limit")
    for key, value in sets:
        set_path(sweep.base, key, value)
    if flags:
        source = f"{source} (with {', '.join(flags)})"
    return sweep, source, lines


@dataclass
class SweepPlan:
    """What a sweep would do (``sweep_plan``): its runs grouped in model cells, and what is already done."""

    name: str
    fingerprint: str
    cells: list[Any]
    #: the cluster's GPUs when a cluster was asked (None: not asked)
    cluster_gpus: float | None = None

    def format(self) -> str:
        """The plan as text: one line per cell and per run (shards done, to do or to resume)."""
        from .pipeline.sweep import describe

        return describe(self.name, self.fingerprint, self.cells, self.cluster_gpus)


def sweep_plan(spec: Any, *, address: str | None = None, store: str | None = None,
               overrides: Sequence[str] | None = None, limit: int | None = None) -> SweepPlan:
    """The dry run of a sweep: its runs, model cells and finished shards, without running anything.
    With ``address``, the cluster is asked how many GPUs it has; ``overrides``/``limit`` as ``load_sweep``."""
    from .pipeline.sweep import plan_sweep

    sweep_spec, source, lines = load_sweep(spec, store=store, overrides=overrides, limit=limit)
    fp, cells = plan_sweep(sweep_spec, source=source, lines=lines)
    gpus = None
    if address:
        from .cluster.connect import init_ray

        gpus = float(init_ray(address, None).cluster_resources().get("GPU", 0))
    return SweepPlan(sweep_spec.name, fp, cells, gpus)


def sweep(spec: Any, *, address: str | None = None, progress: bool = False, store: str | None = None,
          fail_fast: bool = False, events: str | os.PathLike | None = None,
          on_event: Callable[[dict[str, Any]], None] | None = None, overrides: Sequence[str] | None = None,
          limit: int | None = None, decision: Mapping[str, Any] | None = None) -> SweepResult:
    """Run every run of a sweep on Ray (one model load per model cell; finished shards are reused).
    A cell that fails does not stop the others (``fail_fast``: no cell starts after it, and the result's
    ``skipped`` lists those left); the result's ``failed`` lists them with their reasons (a checkpoint that is
    not found fails its cell too), and running the sweep again redoes only those and the unfinished.
    ``events``: a JSON Lines file the sweep's events are appended to; ``on_event``: called with each
    (``auditkit_ray.pipeline.sweep`` describes both and the manifest). ``overrides``/``limit``: as
    ``load_sweep``. ``decision``: fields of the decision (``metric``, ``margin``, ``baseline``, ``confidence``,
    ``prefer``, ``method``) over the file's ``decision:`` section; the rule is checked before anything runs and
    kept with the sweep (``sweep.json``), so its reports lead with it."""
    from .pipeline.sweep import run_sweep

    sweep_spec, source, _ = load_sweep(spec, store=store, overrides=overrides, limit=limit)
    sweep_spec.decision = _sweep_decision(sweep_spec, source, decision)
    return run_sweep(sweep_spec, address=address, progress=progress, source=source, fail_fast=fail_fast,
                     events=os.fspath(events) if events is not None else None, on_event=on_event)


def cell_start_status(event: dict[str, Any]) -> str:
    """A sweep's ``cell_started`` event as its cell's status: ``loading``, ``resuming: 3 of 12 shards stored,
    loading`` or ``stored: 12 of 12 shards, nothing to run``."""
    from .pipeline.sweep import cell_start_status as _status

    return _status(event)


def _sweep_decision(sweep_spec: Any, source: str, flags: Mapping[str, Any] | None) -> Any:
    """The sweep's decision rule with ``flags`` over it, checked against the sweep's runs before it runs."""
    from .compare.decision import merge_rule
    from .config import expand
    from .config.models import DecisionSpec

    stored = sweep_spec.decision.model_dump(mode="json") if sweep_spec.decision is not None else None
    rule = merge_rule(stored, **dict(flags or {}))
    if rule is None:
        return None
    if not rule.baseline:
        raise ConfigError(f"{source}: the decision needs a baseline run (decision.baseline, or --baseline NAME)")
    names = [r.name for r in expand(sweep_spec, source=source)]
    if rule.baseline not in names and not (len(rule.baseline) >= 6 and all(ch in "0123456789abcdef"
                                                                             for ch in rule.baseline)):
        raise ConfigError(f"{source}: decision baseline {rule.baseline!r} is not a run of the sweep (runs: "
                          f"{', '.join(names)})")
    return DecisionSpec.model_validate(rule.to_dict())


def decision_rule(stored: Any = None, **flags: Any) -> Any:
    """A decision rule (``compare.DecisionRule``) from a stored one (a sweep file's section, a mapping) with the
    command line's fields over it (``metric``, ``margin``, ``baseline``, ``confidence``, ``prefer``, ``method``;
    None leaves a field as stored); None when neither asks for a decision."""
    from .compare.decision import merge_rule

    return merge_rule(stored, **flags)


def decide(runs: Sequence[Any], rule: Any, **options: Any) -> Any:
    """Which run to ship: each run against the rule's baseline by a one-sided non-inferiority test on the
    primary metric (paired, direction-aware, Holm across candidates), and the preferred qualifying one
    (``compare.decision``). ``options``: ``baseline`` (over the rule's), ``failed_cells``, ``n_resamples``,
    ``seed``."""
    from .compare.decision import decide as _decide

    return _decide([resolve_run(r) for r in runs], rule, **options)


def shard_status(event: dict[str, Any]) -> str:
    """A sweep's ``shard_done`` event as its cell's status: ``running 3 of 12 shards, 8.0 samples/s, ETA 9s``
    (the rate and ETA once the cell has finished a shard in this invocation)."""
    from .pipeline.sweep import shard_status as _status

    return _status(event)


def lmeval(tasks: str | Iterable[str], model: str | os.PathLike, **options: Any) -> list[RunResult]:
    """lm-evaluation-harness tasks on a local HF checkpoint, one stored RunResult per task
    (options as ``auditkit_ray.lmeval.run_lmeval``; needs the ``lmeval`` extra)."""
    from .lmeval import run_lmeval

    return run_lmeval(tasks, model, **options)


# ----------------------------------------------------------------------------- stored results
def resolve_run(ref: Any, *, db: Any = None) -> Any:
    """A run as commands take it: a RunResult, a run directory or ``result.json`` (local or ``s3://``), a
    unique prefix of a folder's name in an existing folder (``results/sweeps/b18bb8d0``), or a fingerprint
    prefix, run id or name that the ExperimentDB knows (the short fingerprints the commands print)."""
    if not isinstance(ref, (str, os.PathLike)):
        return ref
    text = str(ref)
    if "://" in text or Path(text).exists():
        return ref
    p = Path(text)
    if os.sep in text and p.parent.is_dir() and p.name:  # a bare word is a name or fingerprint, not a folder
        hits = [c for c in p.parent.iterdir() if c.name.startswith(p.name) and not c.name.startswith(".")]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise ConfigError(f"{text}: {len(hits)} entries of {p.parent} start with {p.name!r} "
                              f"({', '.join(sorted(h.name[:16] for h in hits)[:4])}, ...); give more of the name")
    if os.sep in text or text.endswith(".json"):
        return ref  # a path that is not there: the reader says so
    from .store.db import ExperimentDB

    database = db if isinstance(db, ExperimentDB) else ExperimentDB(db)
    try:
        row = database.get(text)
    except ConfigError as exc:
        raise ConfigError(f"{text}: not a file or run directory, and {exc}" if str(exc).startswith("no run matches")
                          else str(exc)) from None
    uri = row.get("result_uri")
    if not uri:
        raise ConfigError(f"{text}: the ExperimentDB knows run {row['fingerprint'][:12]} but not where its "
                          "result.json is (run `auditkit-ray runs sync STORE`)")
    return uri


def resolve_report_input(ref: Any, *, db: Any = None, stores: Sequence[str] | None = None) -> Any:
    """A run or sweep as ``report`` takes it: whatever ``resolve_run`` takes, and a sweep by its name (as
    ``sweep`` stored it) or a unique prefix of its fingerprint; a bare word is looked for in ``stores``
    (default ``./results`` and every local store the ExperimentDB has a run of) and the ExperimentDB. A word
    that names two is a ConfigError listing them; one that names none lists the sweeps there are."""
    if not isinstance(ref, (str, os.PathLike)):
        return ref
    text = str(ref)
    if "://" in text or Path(text).exists() or os.sep in text or text.endswith(".json"):
        return resolve_run(ref, db=db)
    from .report.refs import resolve

    return resolve(text, db=_db(db), stores=list(stores) if stores else None)


def load_run(path: str | os.PathLike) -> RunResult:
    """A stored RunResult from a run directory or its ``result.json`` (local or ``s3://``)."""
    from .store.samples import load_result

    return load_result(path)


def samples_table(result: RunResult | str | os.PathLike) -> Any:
    """The per-sample table of a run (a pyarrow Table in sample order):
    sample_id, repeat, prompt, target, text, raw_text, annotations, scores
    (JSON list of Score dicts), token counts, latency, error, worker."""
    from .store.samples import read_samples_table

    return read_samples_table(result)


def open_store(path: str, endpoint_url: str | None = None, region: str | None = None) -> ResultStore:
    """A result store from a local directory or ``s3://bucket/prefix``."""
    from .store.base import open_store as _open

    return _open(path, endpoint_url, region)


def experiment_db(path: str | os.PathLike | None = None) -> ExperimentDB:
    """The ExperimentDB index of runs (default ``$AUDITKIT_RAY_DB`` or ``~/.auditkit-ray/experiments.sqlite``)."""
    from .store.db import ExperimentDB

    return ExperimentDB(path)


def _db(db: Any) -> ExperimentDB:
    from .store.db import ExperimentDB

    return db if isinstance(db, ExperimentDB) else ExperimentDB(db)


def sync_runs(store: str, *, db: Any = None) -> int:
    """Index every finished run of a result store into the ExperimentDB; returns how many."""
    return _db(db).sync(open_store(store))


def query_runs(*, db: Any = None, model: str | None = None, dataset: str | None = None, name: str | None = None,
               experiment: str | None = None, tags: Mapping[str, str] | None = None,
               metrics: Sequence[str] | None = None, since: str | None = None,
               until: str | None = None) -> list[dict[str, Any]]:
    """Runs of the ExperimentDB matching every filter (``metrics``: conditions like ``exact_match>=0.5``)."""
    return _db(db).query(model=model, dataset=dataset, name=name, experiment=experiment, tags=dict(tags or {}),
                         metrics=list(metrics or []), since=since, until=until)


def show_run(ref: str, *, db: Any = None) -> dict[str, Any]:
    """One run of the ExperimentDB (a fingerprint prefix, run id or name) with its metrics, tags and config."""
    return _db(db).get(ref)


# ----------------------------------------------------------------------------- comparing and reporting
def compare(baseline: Any, candidate: Any, **options: Any) -> Comparison:
    """Compare a candidate run with a baseline (RunResults or result paths):
    direction-aware deltas, grades with reasons, paired tests, gates."""
    from .compare.comparison import compare as _compare

    return _compare(resolve_run(baseline), resolve_run(candidate), **options)


def leaderboard(runs: Sequence[Any], **options: Any) -> Leaderboard:
    """Rank runs per metric with intervals, winners and ties, pairwise paired tests and quality vs cost."""
    from .compare.leaderboard import leaderboard as _leaderboard

    if options.get("baseline") is not None:
        options["baseline"] = resolve_run(options["baseline"])
    return _leaderboard([resolve_run(r) for r in runs], **options)


def parse_assignments(items: Iterable[str] | None, flag: str) -> dict[str, float]:
    """``["METRIC=VALUE", ...]`` (a gate such as ``--fail-under``) as a mapping; ``flag`` names it in errors."""
    from .compare.gates import parse_assignments as _parse

    return _parse(items, flag)


def parse_max_regression(items: Iterable[str] | None) -> Any:
    """``["[METRIC=]X", ...]`` (``--max-regression``: absolute ``0.02`` or relative ``2%``) as gate limits."""
    from .compare.gates import parse_max_regression as _parse

    return _parse(items)


def build_report(runs: Iterable[Any], *, stores: Sequence[str] | None = None, **options: Any) -> Report:
    """The report on runs (run directories, result.json files, sweep directories, RunResults, or the
    names and fingerprint prefixes ``resolve_report_input`` takes, looked for in ``stores``):
    leaderboard, baseline comparisons and gates, ready for ``render_report``."""
    from .report.loader import Inputs
    from .report.loader import build_report as _build

    # the baseline may name one of the runs by label: the loader resolves it
    return _build(runs if isinstance(runs, Inputs) else [resolve_report_input(r, stores=stores) for r in runs],
                  **options)


def render_report(report: Report, fmt: str = "text", **options: Any) -> str:
    """A report in one of ``REPORT_FORMATS`` (text, md, junit, html, json, badge)."""
    from .report.render import render

    return render(report, fmt, **options)


def format_run(result: RunResult, *, color: bool = False) -> str:
    """One run's summary as a terminal table (metric, direction, mean, interval, n, unscored)."""
    from .report.terminal import format_run as _format

    return _format(result, color=color)


def use_color(stream: Any = None) -> bool:
    """Whether output written to ``stream`` (default stdout) should be coloured (a TTY, ``NO_COLOR`` unset)."""
    from .report.terminal import use_color as _use

    return _use(stream)


def results_browser(stores: Sequence[str], *, db: str | os.PathLike | None = None, endpoint_url: str | None = None,
                    region: str | None = None) -> ResultsBrowser:
    """Read-only answers over result stores (local or ``s3://``) and optionally an ExperimentDB, for the viewer:
    ``runs(**filters)``, ``run(fp)``, ``samples(fp, offset=, limit=, search=, status=, metric=, score_min=,
    score_max=)``, ``diff(a, b)``, ``sweep(fp)``, ``sweep_report(fp)``; each a JSON value (the report: HTML)
    with secrets redacted. Runs and sweeps are named by fingerprint (prefix), never by path."""
    from .report.browse import ResultsBrowser

    return ResultsBrowser(list(stores), db=_db(db) if db is not None else None, endpoint_url=endpoint_url,
                          region=region)


# ----------------------------------------------------------------------------- clusters and projects
def k8s_render(sweep_file: str | os.PathLike, **options: Any) -> list[dict[str, Any]]:
    """A KubeRay RayJob (and the ConfigMap holding the sweep file) that runs a sweep; options as ``k8s.render``."""
    from .k8s import render

    return render(sweep_file, **options)


def k8s_dump(docs: list[dict[str, Any]]) -> str:
    """Rendered Kubernetes documents as one multi-document YAML text."""
    from .k8s import dump

    return dump(docs)


def k8s_submit(docs: list[dict[str, Any]], *, kubeconfig: str | None = None, context: str | None = None) -> str:
    """Create the rendered RayJob through the Kubernetes API; returns its name."""
    from .k8s import submit

    return submit(docs, kubeconfig=kubeconfig, context=context)


def init_project(directory: str | os.PathLike = ".", *, force: bool = False) -> list[Path]:
    """Write a starter run file, sweep file and tiny dataset (echo backend: they run with no model)
    and check that they validate; returns the paths written."""
    from .config import load_config as _load
    from .init_templates import write_starter

    written = write_starter(directory, force=force)
    here = os.getcwd()
    try:
        os.chdir(directory)  # the starter's paths are relative to its directory
        _load(STARTER_RUN_FILE)
        _load(STARTER_SWEEP_FILE)
    finally:
        os.chdir(here)
    return written


# --- catalogue, cache, inspect (issue 33)
def catalogue(kind: str | None = None) -> list[dict[str, Any]]:
    """Every registered backend, metric, annotator, judge and oracle (or those of one ``kind``): name,
    direction, family, required fields, the pip extra it needs, description."""
    from .catalogue import catalogue as _catalogue

    return _catalogue(kind)


def catalogue_kinds() -> tuple[str, ...]:
    """The kinds ``catalogue`` lists: backend, metric, annotator, judge, oracle."""
    from .catalogue import KINDS

    return KINDS


def cache_stats(store: str = "results", *, response_cache: str | os.PathLike | None = None, recent: int = 10,
                endpoint_url: str | None = None, region: str | None = None) -> dict[str, Any]:
    """The generation cache of a result store and the API/judge response cache: entries, size, age, and
    the cache hits of the store's ``recent`` newest runs (``auditkit_ray.store.cache``)."""
    from .store.cache import cache_stats as _stats

    return _stats(_cache_store(store, endpoint_url, region), response_cache=response_cache, recent=recent)


def _cache_store(store: str, endpoint_url: str | None, region: str | None) -> ResultStore:
    if "://" not in store and not os.path.isdir(store):
        raise ConfigError(f"--store {store}: no such result store (a directory, or s3://bucket/prefix)")
    return open_store(store, endpoint_url, region)


def cache_clear(store: str | None = "results", *, everything: bool = False, fingerprint: str | None = None,
                older_than: str | None = None, generations: bool = True, responses: bool = True,
                response_cache: str | os.PathLike | None = None, endpoint_url: str | None = None,
                region: str | None = None) -> dict[str, Any]:
    """Remove cache entries: all, those of a fingerprint prefix, or those older than an age such as ``7d``
    (``auditkit_ray.store.cache.cache_clear``); run results are kept. Returns what was removed."""
    from .store.cache import cache_clear as _clear

    st = _cache_store(store, endpoint_url, region) if store is not None else None
    return _clear(st, everything=everything, fingerprint=fingerprint, older_than=older_than,
                  generations=generations, responses=responses, response_cache=response_cache)


def inspect_trace(path: str | os.PathLike, *, dataset: str | os.PathLike | None = None, episode: str | None = None,
                  metrics: Sequence[str] | None = None) -> dict[str, Any]:
    """Read-only inspection of a JSONL agent trace: turns and tool calls (parallel within a turn, sequential
    across turns), the metrics that could score it and the fields the others lack, what each oracle needs.
    ``dataset``: the tool-calling samples the episodes answer (by id). No model call, nothing written."""
    from .trace_inspect import inspect_trace as _inspect

    return _inspect(path, dataset=dataset, episode=episode, metrics=list(metrics) if metrics else None)


def format_inspection(report: dict[str, Any]) -> str:
    """``inspect_trace``'s result as text."""
    from .trace_inspect import format_inspection as _format

    return _format(report)


# ----------------------------------------------------------------------------- the warm local cluster
def prefer_warm_cluster(on: bool = True) -> None:
    """Runs of this process without an address use the machine's warm local Ray cluster (started by the first
    run, stopped after its idle timeout or by ``cluster_down``) instead of a private one; the command line does
    this. ``AUDITKIT_RAY_WARM=0``/``1`` overrides it either way."""
    from .cluster.connect import prefer_warm_cluster as _prefer

    _prefer(on)


def prefer_resident(on: bool | None) -> None:
    """Whether this process's runs keep their generation actors loaded afterwards (resident engines), over
    their files' ``execution.resident``; None: as the files say (the default: on for a cluster on this machine,
    off at an address). The command line's ``--resident`` / ``--no-resident``."""
    from .pipeline.genpool import prefer_resident as _prefer

    _prefer(on)


def _cluster_dict(st: Any, started: bool | None = None) -> dict[str, Any]:
    import time

    out = {"cluster_id": st.cluster_id, "address": st.address, "keeper_pid": st.keeper_pid,
           "idle_timeout_s": st.idle_timeout_s, "up_for_s": round(time.time() - st.started_at, 1),
           "num_cpus": st.num_cpus, "num_gpus": st.num_gpus}
    if started is not None:
        out["started"] = started
    return out


def cluster_up(*, idle_timeout_s: float | None = None, num_cpus: float | None = None,
               num_gpus: float | None = None) -> dict[str, Any]:
    """Start the warm local cluster unless one that fits is up (any folder and shell share it)."""
    from .cluster.warm import up

    st, started = up(num_cpus=num_cpus, num_gpus=num_gpus, idle_s=idle_timeout_s)
    return _cluster_dict(st, started)


def cluster_status(*, address: str | None = None) -> dict[str, Any] | None:
    """The warm local cluster (None when none is up), or the cluster at ``address``: what it is, its processes
    and their memory (local), and its resident engines (model, memory, last use, whether a run holds it)."""
    from .cluster.status import describe

    return describe(address)


def evict(model: str | None = None, *, address: str | None = None) -> list[dict[str, Any]] | None:
    """Free the resident engines whose model (in words) or key contains ``model`` (every one when None), of the
    warm local cluster (None when none is up) or the cluster at ``address``."""
    from .cluster.status import evict as _evict

    return _evict(model, address)


def cluster_down() -> dict[str, Any] | None:
    """Stop the warm local cluster (the commands using it are interrupted first, and resume when run again);
    returns what was stopped, None when none was up."""
    from .cluster.warm import down

    st = down()
    return None if st is None else _cluster_dict(st)


def parse_duration(text: str) -> float:
    """``600``, ``90s``, ``10m``, ``2h`` -> seconds (a ConfigError otherwise)."""
    from .cluster.warm import parse_duration as _parse

    try:
        return _parse(text)
    except ValueError:
        raise ConfigError(f"not a duration: {text!r} (e.g. 600, 90s, 10m, 2h)") from None
