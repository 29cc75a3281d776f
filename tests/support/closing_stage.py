"""A generation actor whose backend leaves a marker file when it is closed, imported by Ray's workers
(``tests/pipeline/test_backend_close.py``)."""

import os
from pathlib import Path

from auditkit_ray.actors.host import GenerationActor


class MarkingGenerationActor(GenerationActor):
    def __init__(self, lead: str, marker_dir: str) -> None:
        super().__init__(lead)
        gen = self.generator
        get_backend = gen._get_backend

        def marking(spec):
            backend = get_backend(spec)
            if not getattr(backend, "marks_close", False):
                close = backend.close

                def marked_close() -> None:
                    Path(marker_dir, f"closed-{os.getpid()}").write_text(type(backend).__name__)
                    close()

                backend.close, backend.marks_close = marked_close, True
            return backend

        gen._get_backend = marking
