"""Generation backends behind one interface (``Backend``).

Each backend module imports its heavy SDK inside ``load()``, which runs once
in the generation actor, never at import time.
"""

from .base import Backend, Request, create_backend

__all__ = ["Backend", "Request", "create_backend"]
