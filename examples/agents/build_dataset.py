"""Writes ``tool_schemas.json`` and ``tools.jsonl`` (the small tool-calling
dataset) from the definitions below. Run from anywhere:

    python examples/agents/build_dataset.py

Categories follow BFCL's: simple (one call), multiple (one call, several
tools offered), parallel (one tool several times in one turn),
parallel_multiple (several tools in one turn), sequential (a later turn needs
an earlier result) and irrelevance (no tool fits; the right behaviour is no
call). Each line is a Sample: ``tools`` (OpenAI-style schemas),
``reference_tool_calls`` (grouped by turn), and where it applies
``expected_state``, ``initial_state``, ``target``, ``reference_routes``,
``allowed_tools`` and ``irrelevant``.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def fn(name, description, properties, required):
    return {"type": "function", "function": {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required,
                           "additionalProperties": False}}}


S = {"type": "string"}
TOOLS = {
    "get_weather": fn(
        "get_weather",
        "Current weather in a city.",
        {"city": S, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        ["city"],
    ),
    "get_time": fn("get_time", "Current time in an IANA time zone.", {"timezone": S}, ["timezone"]),
    "convert_currency": fn(
        "convert_currency",
        "Convert an amount between currencies.",
        {"amount": {"type": "number"}, "from_currency": S, "to_currency": S},
        ["amount", "from_currency", "to_currency"],
    ),
    "search_flights": fn(
        "search_flights",
        "Search flights on a date.",
        {"origin": S, "destination": S, "date": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}},
        ["origin", "destination", "date"],
    ),
    "book_flight": fn(
        "book_flight",
        "Book a flight found by search_flights.",
        {"flight_id": S, "passengers": {"type": "integer", "minimum": 1}},
        ["flight_id", "passengers"],
    ),
    "get_balance": fn("get_balance", "Balance of an account.", {"account": S}, ["account"]),
    "transfer_funds": fn(
        "transfer_funds",
        "Move money between two accounts.",
        {"from_account": S, "to_account": S, "amount": {"type": "number", "exclusiveMinimum": 0}},
        ["from_account", "to_account", "amount"],
    ),
    "delete_account": fn("delete_account", "Close an account for good.", {"account": S}, ["account"]),
}


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


CASES = [
    {"id": "simple-weather", "category": "simple",
     "input": "What's the weather in Paris, in celsius?",
     "tools": ["get_weather"],
     "reference_tool_calls": [[call("get_weather", city="Paris", unit="celsius")]],
     "target": "18 degrees celsius in Paris"},
    {"id": "multiple-currency", "category": "multiple",
     "input": "How much is 100 US dollars in euros?",
     "tools": ["get_weather", "get_time", "convert_currency"],
     "reference_tool_calls": [[call("convert_currency", amount=100, from_currency="USD", to_currency="EUR")]],
     "target": "92 EUR"},
    {"id": "parallel-weather", "category": "parallel",
     "input": "What's the weather in Paris and in London?",
     "tools": ["get_weather"],
     "reference_tool_calls": [[call("get_weather", city="Paris"), call("get_weather", city="London")]],
     "target": "Paris 18, London 14"},
    {"id": "parallel-multiple-tokyo", "category": "parallel_multiple",
     "input": "What's the weather in Tokyo and what time is it there?",
     "tools": ["get_weather", "get_time"],
     "reference_tool_calls": [[call("get_weather", city="Tokyo"), call("get_time", timezone="Asia/Tokyo")]],
     "target": "Tokyo 24, 09:00"},
    {"id": "sequential-flight", "category": "sequential",
     "input": "Find a flight from SFO to JFK on 2024-06-01 and book it for 2 passengers.",
     "tools": ["search_flights", "book_flight"],
     "reference_tool_calls": [[call("search_flights", origin="SFO", destination="JFK", date="2024-06-01")],
                              [call("book_flight", flight_id="UA100", passengers=2)]],
     "initial_state": {"bookings": []},
     "expected_state": {"bookings": [{"flight_id": "UA100", "passengers": 2}]},
     "target": "Booked UA100 for 2 passengers"},
    {"id": "state-transfer", "category": "sequential",
     "input": "Move 50 from checking to savings.",
     "tools": ["get_balance", "transfer_funds", "delete_account"],
     "reference_tool_calls": [[call("transfer_funds", from_account="checking", to_account="savings", amount=50)]],
     "reference_routes": [[[call("get_balance", account="checking")],
                           [call("transfer_funds", from_account="checking", to_account="savings", amount=50)]]],
     "allowed_tools": ["get_balance", "transfer_funds"],
     "initial_state": {"accounts": {"checking": 100, "savings": 100}},
     "expected_state": {"accounts": {"checking": 50, "savings": 150}},
     "target": "Moved 50 from checking to savings"},
    {"id": "irrelevant-joke", "category": "irrelevance",
     "input": "Tell me a joke about cats.",
     "tools": ["get_weather", "convert_currency"],
     "reference_tool_calls": [],
     "irrelevant": True},
]


def rows():
    for case in CASES:
        row = dict(case)
        row["tools"] = [TOOLS[t] for t in case["tools"]]
        yield row


def main() -> None:
    (HERE / "tool_schemas.json").write_text(json.dumps(list(TOOLS.values()), indent=2) + "\n", encoding="utf-8")
    lines = [json.dumps(r, ensure_ascii=False, sort_keys=True) for r in rows()]
    (HERE / "tools.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
