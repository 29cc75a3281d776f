"""Example user code for the agent metrics (importable as ``predicates:...``
when this folder is on ``sys.path``).

* ``booking_made``: a custom-predicate oracle (``custom_predicate`` metric,
  with a required ``version``).
* ``casefold_strings``: a custom argument comparator (``comparator`` param of
  the tool-call metrics): string arguments compared case-insensitively.
"""

from __future__ import annotations

from typing import Any


def booking_made(sample: Any, generation: Any, context: dict, flight_id: str = "UA100") -> bool | None:
    """Success when the final state holds a booking of ``flight_id``; None
    (unknown) when no final state was recorded."""
    state = (generation.metadata or {}).get("final_state")
    if state is None:
        return None
    return any(b.get("flight_id") == flight_id for b in state.get("bookings", []))


def casefold_strings(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    def norm(v: Any) -> Any:
        return v.casefold() if isinstance(v, str) else v

    return expected.keys() == actual.keys() and all(norm(expected[k]) == norm(actual[k]) for k in expected)
