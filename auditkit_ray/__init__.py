"""auditkit-ray: distributed batch evaluation of language models and agents on Ray.

The public facade: every operation of the ``auditkit-ray`` command is a
function here (defined in ``auditkit_ray.api``). Importing it loads no heavy
SDK (ray, torch, transformers, vllm, mlflow, boto3, kubernetes, pyarrow);
those load inside the function or actor that needs them.
"""

from ._version import __version__
from .api import (
    REPORT_FORMATS,
    SweepPlan,
    Validation,
    as_run_spec,
    build_report,
    compare,
    decide,
    evaluate,
    evaluate_many,
    experiment_db,
    format_run,
    generate,
    init_project,
    k8s_dump,
    k8s_render,
    k8s_submit,
    leaderboard,
    list_metrics,
    lmeval,
    load_config,
    load_run,
    load_sweep,
    open_store,
    query_runs,
    render_report,
    rescore,
    rescore_spec,
    run_fingerprint,
    samples_table,
    schema,
    show_run,
    sweep,
    sweep_plan,
    sync_runs,
    validate,
)
from .core import (
    Direction,
    Generation,
    Metric,
    MissingEvidence,
    RunResult,
    Sample,
    Score,
    Status,
    ToolCall,
    register_metric,
)
from .errors import AuditKitError, ConfigError, DataError, GateFailed, MissingExtraError, ResultFormatError

__all__ = [
    "REPORT_FORMATS", "AuditKitError", "ConfigError", "DataError", "Direction", "GateFailed", "Generation", "Metric",
    "MissingEvidence", "MissingExtraError", "ResultFormatError", "RunResult", "Sample", "Score", "Status",
    "SweepPlan", "ToolCall", "Validation", "__version__", "as_run_spec", "build_report", "compare", "decide",
    "evaluate", "evaluate_many", "experiment_db", "format_run", "generate", "init_project", "k8s_dump", "k8s_render",
    "k8s_submit", "leaderboard", "list_metrics", "lmeval", "load_config", "load_run", "load_sweep", "open_store",
    "query_runs", "register_metric", "render_report", "rescore", "rescore_spec", "run_fingerprint", "samples_table",
    "schema", "show_run", "sweep", "sweep_plan", "sync_runs", "validate",
]
