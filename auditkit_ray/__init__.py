"""auditkit-ray: distributed batch evaluation of language models and agents on Ray.

The public facade. Importing it loads no heavy SDK (ray, torch, transformers,
vllm, mlflow, boto3, kubernetes); those load inside the function or actor that
needs them.
"""

from ._version import __version__
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
    load_run,
    register_metric,
)
from .errors import AuditKitError, ConfigError, DataError, GateFailed, MissingExtraError, ResultFormatError

__all__ = [
    "AuditKitError", "ConfigError", "DataError", "Direction", "GateFailed", "Generation", "Metric",
    "MissingEvidence", "MissingExtraError", "ResultFormatError", "RunResult", "Sample", "Score", "Status",
    "ToolCall", "__version__", "compare", "evaluate", "evaluate_many", "load_config", "load_run", "register_metric",
]


def evaluate(spec, **kwargs):
    """Run one evaluation (a RunSpec, a dict, or a path to a run file) on Ray."""
    from .api import evaluate as _evaluate

    return _evaluate(spec, **kwargs)


def evaluate_many(base, datasets, **kwargs):
    """One model over several datasets, loading the model once."""
    from .api import evaluate_many as _many

    return _many(base, datasets, **kwargs)


def compare(baseline, candidate, **kwargs):
    """Compare a candidate run with a baseline (RunResults or result paths):
    direction-aware deltas, grades with reasons, paired tests, gates."""
    from .compare import compare as _compare

    return _compare(baseline, candidate, **kwargs)


def load_config(path):
    """Load and validate a run or sweep file."""
    from .config import load_config as _load

    return _load(path)
