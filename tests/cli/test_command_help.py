"""Every command says what it does (issue 30): ``--address``, ``--store`` and ``--quiet`` are documented
wherever they are taken, sub-commands print their own help, ``runs list`` has a header row and ``runs show`` a
human form beside ``--json``. The real console script, in a subprocess."""

from __future__ import annotations

import json

import pytest
from console import console

from auditkit_ray.testing.runs import build_run


@pytest.mark.parametrize("command", [["run"], ["generate"], ["rescore"], ["sweep"], ["lmeval"]],
                         ids=lambda c: c[0])
def test_address_store_and_quiet_are_documented_in_every_command_that_takes_them(command):
    r = console(*command, "--help")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    for flag, words in (("--address", "Ray cluster address"), ("--store", "result store"),
                        ("--quiet", "no progress lines")):
        if flag in text:
            assert words in text, f"{command[0]} --help: {flag} has no help text"
    assert "--address" in text and "--quiet" in text


@pytest.mark.parametrize("command, usage", [(["runs", "list"], "usage: auditkit-ray runs list"),
                                            (["runs", "show"], "usage: auditkit-ray runs show"),
                                            (["k8s", "render"], "usage: auditkit-ray k8s render"),
                                            (["k8s", "submit"], "usage: auditkit-ray k8s submit")])
def test_sub_commands_print_their_own_help(command, usage):
    r = console(*command, "--help")
    assert r.returncode == 0 and r.stdout.startswith(usage), r.stdout[:200]


def test_runs_list_has_a_header_and_runs_show_a_human_form(tmp_path):
    from auditkit_ray import experiment_db, load_run

    path = build_run(tmp_path, "base", {"acc": {"values": {f"q{i}": 1.0 for i in range(5)}}})
    db = tmp_path / "db.sqlite"
    experiment_db(db).record(load_run(path), result_uri=str(path))
    env = {"AUDITKIT_RAY_DB": str(db)}
    lines = console("runs", "list", env=env).stdout.splitlines()
    assert lines[0].split()[:3] == ["fingerprint", "created", "name"] and "base" in lines[1]
    human = console("runs", "show", "base", env=env)
    assert human.returncode == 0 and human.stdout.startswith("run base  (fingerprint ")
    assert "acc" in human.stdout and "1.0000" in human.stdout and "{" not in human.stdout
    as_json = console("runs", "show", "base", "--json", env=env)
    assert json.loads(as_json.stdout)["name"] == "base"
