"""Sinks a run's results are mirrored to (MLflow). The lm-eval bridge is ``auditkit_ray.lmeval``."""
