"""A generation stage whose backend leaves a marker file when it is closed,
imported by Ray's workers as a Ray Data UDF (``tests/pipeline/test_backend_close.py``)."""

import os
from pathlib import Path

from auditkit_ray.actors.generate import GenerateStage


class MarkingGenerateStage(GenerateStage):
    def __init__(self, runs, marker_dir: str) -> None:
        super().__init__(runs)
        self.marker_dir = marker_dir

    def _get_backend(self, spec):
        backend = super()._get_backend(spec)
        if not getattr(backend, "marks_close", False):
            close = backend.close

            def marked_close() -> None:
                Path(self.marker_dir, f"closed-{os.getpid()}").write_text(type(backend).__name__)
                close()

            backend.close, backend.marks_close = marked_close, True
        return backend
