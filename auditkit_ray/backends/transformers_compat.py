"""The one place that changes a transformers internal at runtime.

transformers' generation code imports scikit-learn (and with it much of
SciPy) when it loads, only for assisted decoding's confidence threshold,
which the ``hf`` backend never uses: a large part of every generation
actor's start, paid before its first shard. In a
process of ours (a generation actor) that has not loaded that code yet,
``skip_sklearn_import`` makes transformers believe scikit-learn is absent.

It was written for the transformers versions in ``TESTED`` (where
``transformers.utils.is_sklearn_available`` and
``transformers.utils.import_utils.is_sklearn_available`` decide the import).
Outside them it changes nothing; inside them, a missing attribute is an
error that names the version, not an ``AttributeError`` deep inside.
"""

from __future__ import annotations

import logging

from ..errors import RunError

log = logging.getLogger(__name__)

#: transformers versions this adapter was written for: [first, last)
TESTED = ((4, 45), (6, 0))


def _version(text: str) -> tuple[int, int] | None:
    try:
        major, minor = (int(x) for x in text.split(".")[:2])
    except ValueError:
        return None
    return major, minor


def _absent() -> bool:
    return False


def skip_sklearn_import() -> None:
    """Tell transformers that scikit-learn is not installed (call it before
    ``transformers.generation`` is imported, in a process of ours only)."""
    import transformers

    version = _version(transformers.__version__)
    if version is None or not TESTED[0] <= version < TESTED[1]:
        log.debug("transformers %s is outside %s: scikit-learn is imported as usual", transformers.__version__, TESTED)
        return
    import transformers.utils as tu
    import transformers.utils.import_utils as iu

    for module in (tu, iu):
        if not callable(getattr(module, "is_sklearn_available", None)):
            raise RunError(
                f"transformers {transformers.__version__}: {module.__name__}.is_sklearn_available is gone; "
                f"auditkit_ray.backends.transformers_compat was written for transformers "
                f">={TESTED[0][0]}.{TESTED[0][1]},<{TESTED[1][0]}.{TESTED[1][1]} and needs an update"
            )
    tu.is_sklearn_available = iu.is_sklearn_available = _absent
