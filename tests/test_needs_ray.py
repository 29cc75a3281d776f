"""The ``ray`` mark (tests/support/needs_ray.py) is on the tests that need Ray and only on them: what decides it,
on a test file written here, and on tests of this repository whose needs are known."""

from __future__ import annotations

import textwrap

from needs_ray import _File

SOURCE = '''
import subprocess
import sys

import pytest
from auditkit_ray import api, evaluate as run_it
from console import console

EXE = "auditkit-ray"


def helper(tmp_path):
    return console("run", "run.yaml", cwd=tmp_path)


def pure_helper(x):
    return x + 1


def test_pure():
    assert pure_helper(1) == 2


def test_validate_only(tmp_path):
    assert console("validate", "run.yaml", cwd=tmp_path).returncode == 0


def test_help_of_a_command_in_a_variable():
    for cmd in ("run", "sweep"):
        assert console(cmd, "--help").returncode == 0


def test_through_a_helper(tmp_path):
    assert helper(tmp_path).returncode == 0


def test_command_in_a_variable(tmp_path):
    cmd = "run"
    assert console(cmd, "x.yaml").returncode == 0


def test_in_process_main():
    from auditkit_ray.cli import main

    assert main(["sweep", "s.yaml"]) == 0


def test_in_process_main_compare():
    from auditkit_ray.cli import main

    assert main(["compare", "a", "b"]) == 0


def test_api_evaluate(spec):
    assert api.evaluate(spec)


def test_entry_point_imported_under_another_name(spec):
    assert run_it(spec)


def test_api_compare(a, b):
    assert api.compare(a, b)


def test_subprocess_of_the_module():
    subprocess.run([sys.executable, "-m", "auditkit_ray.cli", "sweep", "s.yaml"], check=True)


def test_subprocess_of_the_console_script():
    subprocess.run([EXE, "run", "r.yaml"], check=True)


def test_ray_itself():
    ray = pytest.importorskip("ray")
    assert ray


def test_a_support_script(tmp_path):
    subprocess.run([sys.executable, "tests/support/soak_run.py", "10", str(tmp_path)], check=True)


class TestGrouped:
    def test_one(self):
        assert helper
'''

NEEDS = {"test_through_a_helper", "test_command_in_a_variable", "test_in_process_main", "test_api_evaluate",
         "test_entry_point_imported_under_another_name", "test_subprocess_of_the_module",
         "test_subprocess_of_the_console_script", "test_ray_itself", "test_a_support_script", "TestGrouped"}
NO_RAY = {"test_pure", "test_validate_only", "test_help_of_a_command_in_a_variable", "test_in_process_main_compare",
          "test_api_compare"}


def test_each_way_of_reaching_ray_marks_the_test_and_nothing_else_does(tmp_path):
    path = tmp_path / "test_sample.py"
    path.write_text(textwrap.dedent(SOURCE), encoding="utf-8")
    f = _File(path)
    assert {n for n in NEEDS | NO_RAY if f.needs_ray(n)} == NEEDS


def test_the_fixtures_that_start_a_cluster_need_ray_and_the_builders_do_not(root):
    tests = root / "tests"
    top = _File(tests / "conftest.py")
    assert top.needs_ray("ray_cluster")
    assert _File(tests / "backends" / "conftest.py").needs_ray("local_ray")
    assert _File(tests / "gpu" / "conftest.py").needs_ray("gpu_cluster")
    assert not any(top.needs_ray(n) for n in ("tiny_model", "tiny_grid", "s3_server", "s3_bucket", "write", "make_spec",
                                               "arith", "rows", "numbers", "library_warnings_on_stderr",
                                               "cluster_gpus_free"))
