"""Built-in metrics. Each module is imported only when one of its metrics is
resolved (see ``auditkit_ray.core.registry``)."""
