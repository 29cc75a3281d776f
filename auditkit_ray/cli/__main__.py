"""``python -m auditkit_ray.cli``: the ``auditkit-ray`` command."""

from . import entrypoint

entrypoint()
