"""Helpers of the lm-evaluation-harness bridge (``auditkit_ray.lmeval``):
loading lm-eval tasks, their identity, per-sample scores in our ``Score``
form, and task-level summaries from lm-eval's own aggregation functions.

lm_eval (and datasets, numpy) are imported inside functions only, so that
``import auditkit_ray`` stays light; a missing extra raises one line naming
``pip install 'auditkit-ray[lmeval]'``.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..core.aggregate import MeanStats, summarize
from ..core.fingerprint import fingerprint
from ..core.metric import Direction
from ..core.result import MetricSummary
from ..core.types import Score, Status
from ..errors import ConfigError
from ..pipeline.identity import hash_path
from .compat import import_lm_eval, load_task_yaml

#: the tasks that ship with auditkit-ray (always on the include path)
TASKS_DIR = Path(__file__).resolve().with_name("tasks")
#: ``datasets`` builders that read local files named in ``data_files``
LOCAL_BUILDERS = frozenset({"json", "csv", "parquet", "text", "arrow"})
#: lm-eval bootstraps these with at most 100 resamples (as its evaluator does)
_SLOW_BOOTSTRAP = ("bleu", "chrf", "chrf++", "ter")
#: lm-eval's default seeds: python random, numpy, torch, few-shot sampler
DEFAULT_SEEDS = (0, 1234, 1234, 1234)


def score_name(metric: str, filter_key: str) -> str:
    """``acc`` for lm-eval's default filter ("none"), ``exact_match@strict-match``
    for a named filter (lm-eval writes ``exact_match,strict-match``)."""
    return metric if filter_key == "none" else f"{metric}@{filter_key}"


def jsonable(value: Any) -> Any:
    """numpy scalars and arrays, tuples and the like as plain JSON values."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars
    if callable(tolist):
        return jsonable(tolist())
    return str(value)


def is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return math.isfinite(float(value))
    item = getattr(value, "item", None)  # a numpy scalar
    if callable(item) and getattr(value, "shape", None) == ():
        return is_number(item())
    return False


def seeds_of(seed: int | tuple[int, ...] | list[int] | None) -> tuple[int, int, int, int]:
    """lm-eval's ``--seed``: one number sets all four seeds; four set each."""
    if seed is None:
        return DEFAULT_SEEDS
    if isinstance(seed, int) and not isinstance(seed, bool):
        return (seed, seed, seed, seed)
    values = tuple(int(s) for s in seed)
    if len(values) != 4:
        raise ConfigError(f"seed: give one integer or four (python, numpy, torch, few-shot), got {len(values)}")
    return values  # type: ignore[return-value]


# --------------------------------------------------------------------------- offline
@contextlib.contextmanager
def offline(enabled: bool) -> Iterator[None]:
    """With ``enabled``, keep ``datasets`` off the network while tasks load
    (their data is local files): HF_DATASETS_OFFLINE=1 unless the user set it."""
    if not enabled or os.environ.get("HF_DATASETS_OFFLINE") is not None:
        yield
        return
    import sys

    os.environ["HF_DATASETS_OFFLINE"] = "1"
    cfg = sys.modules.get("datasets.config")
    saved = {k: getattr(cfg, k) for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
             if cfg is not None and hasattr(cfg, k)}
    for k in saved:
        setattr(cfg, k, True)
    try:
        yield
    finally:
        os.environ.pop("HF_DATASETS_OFFLINE", None)
        for k, v in saved.items():
            setattr(cfg, k, v)


# --------------------------------------------------------------------------- loading
@dataclass(frozen=True)
class TaskOptions:
    """How tasks are found and set up (the same on the driver and in actors)."""

    include_path: tuple[str, ...] = ()
    num_fewshot: int | None = None
    fewshot_seed: int | None = DEFAULT_SEEDS[3]

    def paths(self) -> list[str]:
        extra = [str(Path(p).expanduser().resolve()) for p in self.include_path]
        return [str(TASKS_DIR)] + [p for p in extra if p != str(TASKS_DIR)]

    def as_params(self) -> dict[str, Any]:
        return {"include_path": self.paths()[1:], "num_fewshot": self.num_fewshot, "fewshot_seed": self.fewshot_seed}


def _map_files(value: Any, fn) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return [_map_files(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_files(v, fn) for k, v in value.items()}
    return value


def _data_files(cfg: dict) -> Any:
    return (cfg.get("dataset_kwargs") or {}).get("data_files")


def resolve_data_files(cfg: dict, base: Path) -> bool:
    """Make relative ``data_files`` that exist next to the task YAML absolute
    (lm-eval itself reads them from the working directory). True if changed."""
    files = _data_files(cfg)
    if files is None:
        return False
    changed = False

    def fix(p: str) -> str:
        nonlocal changed
        if "://" in p or Path(p).is_absolute():
            return p
        cand = base / p
        if cand.exists():
            changed = True
            return str(cand.resolve())
        return p

    new = _map_files(files, fix)
    if changed:
        cfg["dataset_kwargs"] = {**cfg["dataset_kwargs"], "data_files": new}
    return changed


def is_local(cfg: dict) -> bool:
    """The task reads only local files (a ``datasets`` file builder)."""
    if cfg.get("custom_dataset") is not None or cfg.get("dataset_path") not in LOCAL_BUILDERS:
        return False
    files = _data_files(cfg)
    if files is None:
        return False
    found: list[bool] = []
    _map_files(files, lambda p: found.append("://" not in p and Path(p).exists()))
    return bool(found) and all(found)


def _kind(entry: Any) -> str:
    return str(getattr(getattr(entry, "kind", None), "name", "")).upper()


@dataclass
class LoadedTasks:
    tasks: dict[str, Any]
    manager: Any
    local: bool
    groups: list[str] = field(default_factory=list)


def load_tasks(names: list[str], opts: TaskOptions) -> LoadedTasks:
    """lm-eval Task objects for task (or group) names, set up as
    ``simple_evaluate`` sets them up: few-shot count and sampler seed."""
    import_lm_eval()
    from lm_eval.tasks import TaskManager

    paths = opts.paths()
    tm = TaskManager(include_path=paths, include_defaults=False)
    if any(n not in tm.all_tasks for n in names):
        tm = TaskManager(include_path=paths, include_defaults=True)
    missing = [n for n in names if n not in tm.all_tasks]
    if missing:
        raise ConfigError(f"lm-eval task(s) {', '.join(map(repr, missing))} not found; add the folder of their YAML "
                          f"with include_path (--include-path DIR)")
    specs: list[Any] = []
    local = True
    groups: list[str] = []
    for name in names:
        entry = tm.task_index[name]
        if _kind(entry) == "TASK" and getattr(entry, "yaml_path", None):
            cfg = load_task_yaml(entry.yaml_path)
            if "class" not in cfg:
                resolve_data_files(cfg, Path(entry.yaml_path).parent)
                local = local and is_local(cfg)
                cfg["task"] = name
                specs.append(cfg)
                continue
        if _kind(entry) in ("GROUP", "TAG"):
            groups.append(name)
        local = False
        specs.append(name)
    with offline(local):
        loaded = tm.load(specs)
    tasks = dict(loaded["tasks"])
    for task in tasks.values():
        configure(task, opts)
    return LoadedTasks(tasks=tasks, manager=tm, local=local, groups=groups)


def configure(task: Any, opts: TaskOptions) -> None:
    """simple_evaluate's few-shot override: a task whose config says 0 shots
    keeps 0; no override and no count means 0; then the sampler seed."""
    if opts.num_fewshot is not None:
        if task.get_config("num_fewshot") != 0:
            task.set_config(key="num_fewshot", value=opts.num_fewshot)
    elif task.get_config("num_fewshot") is None:
        task.set_config(key="num_fewshot", value=0)
    task.set_fewshot_seed(seed=opts.fewshot_seed)


# --------------------------------------------------------------------------- identity
def task_config(task: Any) -> dict[str, Any]:
    """The task's config as lm-eval dumps it (functions as their source)."""
    return jsonable(task.dump_config())


def task_identity(task: Any) -> dict[str, Any]:
    """Name, version, output type, few-shot count and a hash of the config in
    which local data files are replaced by their content hash (so the hash
    follows the data, not where it lies)."""
    cfg = task_config(task)
    meta = dict(cfg.get("metadata") or {})
    meta.pop("config_source", None)
    cfg["metadata"] = meta
    files = _data_files(cfg)
    if files is not None:
        cfg["dataset_kwargs"] = {**cfg["dataset_kwargs"], "data_files": _map_files(
            files, lambda p: {"sha256": hash_path(p)} if "://" not in p and Path(p).exists() else p)}
    return {
        "name": task.task_name,
        "version": jsonable(task.VERSION),
        "output_type": task.OUTPUT_TYPE or cfg.get("output_type"),
        "num_fewshot": cfg.get("num_fewshot"),
        "config_hash": fingerprint(cfg),
    }


def dataset_fingerprint(identity: dict[str, Any], limit: Any, seeds: tuple[int, ...]) -> str:
    """What was evaluated (docs, prompts, few-shot examples), whoever ran it:
    the same for both engines and every model, so their runs compare."""
    return fingerprint({"kind": "lm_eval_task", "task": identity, "limit": limit, "fewshot_seed": seeds[3],
                        "python_seed": seeds[0], "numpy_seed": seeds[1]})


# --------------------------------------------------------------------------- per-sample scores
def _aggregation(task: Any, metric: str) -> Any:
    from lm_eval.api.metrics import mean

    return (task.aggregation() or {}).get(metric, mean)


def is_mean(task: Any, metric: str) -> bool:
    from lm_eval.api.metrics import mean

    agg = _aggregation(task, metric)
    return agg is mean or getattr(agg, "__name__", "") == "mean"


def doc_scores(task: Any, per_filter: dict[str, dict[str, Any]], filtered: dict[str, Any], resps: Any) -> list[Score]:
    """Scores of one doc from ``process_results`` outputs per filter.

    A metric that lm-eval averages gets its per-sample value (``scored``);
    one it aggregates otherwise (brier_score, bleu, perplexity) has no
    per-sample value: its lm-eval item is kept in ``metadata.lm_eval_item``
    and the score is ``not_tested``. The first score carries the model's raw
    responses (``metadata.resps``), each its filter's output (``filtered``)."""
    out: list[Score] = []
    for fkey, metrics in per_filter.items():
        for metric, item in metrics.items():
            name = score_name(metric, fkey)
            meta: dict[str, Any] = {"lm_eval_metric": metric, "filter": fkey, "filtered": jsonable(filtered.get(fkey))}
            if not out:
                meta["resps"] = jsonable(resps)
            if is_mean(task, metric) and is_number(item):
                out.append(Score.scored(name, float(item), metadata=meta))
            else:
                meta["lm_eval_item"] = jsonable(item)
                out.append(Score.not_tested(name, "lm-eval aggregates this metric over all samples; "
                                                  "its per-sample item is in metadata.lm_eval_item", metadata=meta))
    return out


def item_of(score: dict[str, Any]) -> Any:
    """The lm-eval item a stored score carries (None for errors)."""
    meta = score.get("metadata") or {}
    if score.get("status") == Status.SCORED.value:
        return score.get("value")
    return meta.get("lm_eval_item")


# --------------------------------------------------------------------------- summaries
@dataclass
class MetricItems:
    metric: str
    filter: str
    items: list[Any] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {s.value: 0 for s in Status})


def collect_items(per_doc_scores: list[list[dict[str, Any]]]) -> dict[str, MetricItems]:
    """Per score name, lm-eval items in doc order and status counts."""
    out: dict[str, MetricItems] = {}
    for scores in per_doc_scores:
        for s in scores:
            meta = s.get("metadata") or {}
            if "lm_eval_metric" not in meta:
                continue
            mi = out.setdefault(s["name"], MetricItems(meta["lm_eval_metric"], meta.get("filter", "none")))
            status = s.get("status", "scored")
            mi.counts[status] = mi.counts.get(status, 0) + 1
            if status == Status.SCORED.value or (status == Status.NOT_TESTED.value and "lm_eval_item" in meta):
                mi.items.append(item_of(s))
    return out


def aggregate(task: Any, metric: str, items: list[Any], bootstrap_iters: int) -> tuple[float | None, float | None]:
    """lm-eval's task-level number and its standard error, as its evaluator
    computes them (``_compute_task_aggregations``)."""
    from lm_eval.api.metrics import stderr_for_metric

    if not items:
        return None, None
    agg = _aggregation(task, metric)
    value = agg(items)
    stderr = None
    if bootstrap_iters and bootstrap_iters > 0 and len(items) > 1:
        iters = min(bootstrap_iters, 100) if metric in _SLOW_BOOTSTRAP else bootstrap_iters
        fn = stderr_for_metric(metric=agg, bootstrap_iters=iters)
        stderr = fn(items) if fn else None
    return _float(value), _float(stderr)


def _float(v: Any) -> float | None:
    if v is None or v == "N/A" or not is_number(v):
        return None
    return float(v)


def summaries(task: Any, collected: dict[str, MetricItems], *, higher_is_better: dict[str, Any], ident: dict[str, Any],
              lm_version: str, bootstrap_iters: int,
              reported: dict[str, Any] | None = None) -> dict[str, MetricSummary]:
    """MetricSummary per lm-eval (metric, filter): the mean is lm-eval's
    aggregate (``reported`` by simple_evaluate, or computed here with its
    aggregation functions from the per-sample items), the direction its
    ``higher_is_better``."""
    out: dict[str, MetricSummary] = {}
    for name, mi in collected.items():
        agg = _aggregation(task, mi.metric)
        mean_agg = is_mean(task, mi.metric)
        if reported is not None and f"{mi.metric},{mi.filter}" in reported:
            value = _float(reported.get(f"{mi.metric},{mi.filter}"))
            stderr = _float(reported.get(f"{mi.metric}_stderr,{mi.filter}"))
        else:
            value, stderr = aggregate(task, mi.metric, mi.items, bootstrap_iters)
        hib = higher_is_better.get(mi.metric)
        direction = Direction.MINIMIZE if hib is False else Direction.MAXIMIZE
        stats: dict[str, Any] = {}
        if mean_agg and mi.items and all(is_number(x) for x in mi.items):
            ms = MeanStats()
            for x in mi.items:
                ms.add(Score.scored(name, float(x)))
            st = summarize(ms)
            stats = {k: st[k] for k in ("ci_low", "ci_high", "ci_method")}
            counts = dict(sorted(mi.counts.items()))
            n, total = len(mi.items), sum(mi.counts.values())
        else:  # aggregated over all items: each item counts as scored
            n = total = len(mi.items)
            counts = {s.value: 0 for s in Status} | {"scored": n, "error": mi.counts.get("error", 0)}
            total += counts["error"]
            counts = dict(sorted(counts.items()))
        out[name] = MetricSummary(
            name=name, direction=direction, family="lm_eval", aggregation="mean" if mean_agg else "corpus",
            mean=value, n=n, total=total, unscored=total - n, counts=counts, stderr=stderr, **stats,
            identity={
                "name": name, "class": f"lm_eval:{ident['name']}", "version": str(ident["version"]),
                "direction": direction.value,
                "params": {"task": ident["name"], "metric": mi.metric, "filter": mi.filter,
                           "aggregation": getattr(agg, "__name__", str(agg)), "higher_is_better": hib,
                           "config_hash": ident["config_hash"], "lm_eval_version": lm_version},
            },
            signature=f"lm_eval {lm_version}|task {ident['name']} v{ident['version']}|{mi.metric},{mi.filter}|"
                      f"agg {getattr(agg, '__name__', agg)}|shots {ident['num_fewshot']}",
        )
    return out
