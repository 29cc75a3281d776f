"""The gate flags and the statistics' settings are declared once (``cli/compare.py``), and every command
that takes them (compare, leaderboard, report) has the same ones, with the same help."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from auditkit_ray.cli import build_parser

CLI = Path(__file__).resolve().parents[2] / "auditkit_ray" / "cli"
FLAGS = ("--fail-under", "--fail-over", "--max-regression", "--alpha", "--confidence", "--resamples", "--seed")
COMMANDS = ("compare", "leaderboard", "report")


def _declarations(flag: str) -> list[str]:
    out = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_argument" and node.args
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value == flag):
                out.append(f"{path.name}:{node.lineno}")
    return out


@pytest.mark.parametrize("flag", [f for f in FLAGS if f != "--seed"])  # lmeval's --seed is lm-eval's seeds
def test_each_flag_is_declared_once(flag):
    where = _declarations(flag)
    assert len(where) == 1, f"{flag} is declared {len(where)} times: {where}"


def _actions(command: str) -> dict[str, tuple]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    parser = sub.choices[command]
    return {opt: (a.dest, a.default, a.help, a.metavar) for a in parser._actions for opt in a.option_strings
            if opt in FLAGS}


def test_every_gated_command_takes_the_same_flags():
    first = _actions(COMMANDS[0])
    assert set(first) == set(FLAGS)
    for command in COMMANDS[1:]:
        assert _actions(command) == first, command
