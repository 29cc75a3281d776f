"""An lm-eval task's scoring as a group-scope Metric (``engine="pipeline"``).

Per sample (one lm-eval doc, with all its requests: the choices of a multiple
choice doc, the repeats of a generation), the metric rebuilds lm-eval
``Instance`` objects from our generations, runs the task's filters and calls
``task.process_results(doc, results)``, exactly as lm-eval's evaluator does
per doc. The task is loaded once per scoring actor, with the options the
driver used; a task whose config hash differs from the driver's (other data
or YAML on this node) fails its samples loudly instead of scoring them.
"""

from __future__ import annotations

from typing import Any

from ..core.metric import Direction, Metric
from ..core.types import Generation, Sample, Score

REF = "auditkit_ray.lmeval.metric:LMEvalTaskMetric"

_TASKS: dict[tuple, Any] = {}  # per process: (task, options) -> Task


class LMEvalTaskMetric(Metric):
    """Scores a sample with its lm-eval task's filters and process_results."""

    name = "lm_eval_task"
    # the direction of each lm-eval metric comes from higher_is_better and is
    # recorded on its summary; this one only satisfies the contract
    direction = Direction.MAXIMIZE
    family = "lm_eval"
    scope = "group"
    pool = "checks"

    def __init__(self, *, task: str, config_hash: str, include_path: list[str] | None = None,
                 num_fewshot: int | None = None, fewshot_seed: int | None = 1234, lm_eval_version: str | None = None,
                 bootstrap_iters: int | None = None, on: str | None = None) -> None:
        # bootstrap_iters is used by the driver (task-level stderr); it is a
        # parameter so that it enters the run's fingerprint
        super().__init__(task=task, config_hash=config_hash, include_path=list(include_path or []),
                         num_fewshot=num_fewshot,
                         fewshot_seed=fewshot_seed, lm_eval_version=lm_eval_version, bootstrap_iters=bootstrap_iters)
        self.task_name = task

    # ------------------------------------------------------------------ the task
    def _task(self) -> Any:
        from .compat import lm_eval_version
        from .support import TaskOptions, load_tasks, task_identity

        p = self.params
        opts = TaskOptions(tuple(p["include_path"]), p["num_fewshot"], p["fewshot_seed"])
        key = (self.task_name, opts)
        if key not in _TASKS:
            task = load_tasks([self.task_name], opts).tasks[self.task_name]
            ident = task_identity(task)
            if ident["config_hash"] != p["config_hash"]:
                raise RuntimeError(f"lm-eval task {self.task_name!r} loads with config hash "
                                   f"{ident['config_hash'][:12]} here, "
                                   f"{p['config_hash'][:12]} on the driver: its YAML or data differ on this node")
            if p.get("lm_eval_version") and lm_eval_version() != p["lm_eval_version"]:
                raise RuntimeError(f"lm-eval {lm_eval_version()} here, {p['lm_eval_version']} on the driver")
            _TASKS[key] = task
        return _TASKS[key]

    def metric_names(self, task: Any) -> list[str]:
        from .compat import task_filters
        from .support import score_name

        filters = [f.name for f in task_filters(task)] or ["none"]
        return [score_name(m, f) for f in filters for m in (task.aggregation() or {})]

    # ------------------------------------------------------------------ scoring
    def score(self, sample: Sample, generation: Generation, context: dict) -> Any:  # pragma: no cover - group metric
        raise TypeError("a group metric")

    def score_group(self, sample: Sample, generations: list[Generation], contexts: list[dict]) -> list[Score]:
        from lm_eval.api.instance import Instance

        from .compat import task_filters
        from .support import doc_scores

        task = self._task()
        failed = next((g.error for g in generations if g.error), None)
        if failed:
            return [Score.error(n, f"generation failed: {failed}") for n in self.metric_names(task)]
        doc = sample.metadata["doc"]
        doc_id = int(sample.metadata["doc_id"])
        out_type = task.OUTPUT_TYPE
        if out_type == "generate_until":
            order = sorted(range(len(generations)), key=lambda k: contexts[k].get("repeat", 0))
            resps_per_instance = [[generations[k].text for k in order]]
            kinds = ["generate_until"]
        else:
            by_choice = sorted(generations, key=lambda g: (g.metadata or {}).get("choice") or 0)
            resps_per_instance = [[(float(g.metadata["loglikelihood"]),
                                    bool(g.metadata["is_greedy"]))] for g in by_choice]
            kinds = ["loglikelihood"] * len(by_choice)
        instances = []
        for idx, (kind, resps) in enumerate(zip(kinds, resps_per_instance)):
            inst = Instance(request_type=kind, doc=doc, arguments=(), idx=idx,
                            metadata=(self.task_name, doc_id, len(resps)))
            inst.resps = list(resps)
            instances.append(inst)
        for ensemble in task_filters(task):
            ensemble.apply(instances)
        per_filter: dict[str, dict[str, Any]] = {}
        filtered: dict[str, Any] = {}
        for fkey in instances[0].filtered_resps:
            results = [inst.filtered_resps[fkey] for inst in instances]
            per_filter[fkey] = task.process_results(doc, results)
            filtered[fkey] = results[0] if out_type == "generate_until" else None
        raw = resps_per_instance[0] if out_type == "generate_until" else [r[0] for r in resps_per_instance]
        return doc_scores(task, per_filter, filtered, raw)

    def _normalise(self, res: Any) -> list[Score]:
        # lm-eval's metric names are kept as they are (acc, exact_match@strict-match),
        # not prefixed with this metric's name
        if isinstance(res, list) and all(isinstance(s, Score) for s in res):
            return res
        return super()._normalise(res)
