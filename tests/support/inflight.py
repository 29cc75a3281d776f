"""A scripted reply for the OpenAI test server that counts the requests it is
answering at once (``now``, and the most at any moment: ``max``)."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable


class InFlight:
    def __init__(self, answer: Callable[[dict[str, Any]], str], hold_s: float) -> None:
        self.answer, self.hold_s = answer, hold_s
        self.lock, self.now, self.max = threading.Lock(), 0, 0

    def __call__(self, body: dict[str, Any]) -> str:
        with self.lock:
            self.now += 1
            self.max = max(self.max, self.now)
        time.sleep(self.hold_s)
        with self.lock:
            self.now -= 1
        return self.answer(body)
