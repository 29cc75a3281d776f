"""The lm-evaluation-harness bridge: lm-eval tasks as auditkit-ray runs.

Ranked above the pipeline (its ``pipeline`` engine runs a task through it):
``bridge`` (``run_lmeval``), ``support`` (tasks, identities, scores),
``metric`` (a task's ``process_results`` as a metric), ``compat`` (the one
module that touches lm-eval's internals) and ``tasks/`` (the bundled tasks).
Nothing here imports lm_eval at module level.
"""

from .bridge import run_lmeval

__all__ = ["run_lmeval"]
