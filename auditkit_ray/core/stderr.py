"""A logging handler's stream that is ``sys.stderr`` as it is at each record, not as it was when the handler was
made.

``logging.StreamHandler`` keeps the stream it was given. A handler made while ``sys.stderr`` was redirected
(``contextlib.redirect_stderr``, a notebook cell's capture, a test's ``capsys``) keeps writing to that stream after
it is closed, and each record then prints "--- Logging error --- ValueError: I/O operation on closed file" with a
traceback instead of its message.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

__all__ = ["FollowsStderr", "StderrHandler"]


class FollowsStderr:
    """Mixin for a ``logging.StreamHandler``: its ``stream`` is always today's ``sys.stderr`` (an assignment to it,
    such as StreamHandler's own in its ``__init__`` or ``setStream``, is ignored)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        """Ignored: the stream is always today's ``sys.stderr``."""


class StderrHandler(FollowsStderr, logging.StreamHandler):
    """A StreamHandler that writes each record to ``sys.stderr`` as it is when the record comes."""
