"""tests/pipeline: every test here reads the library's warnings on stderr (``library_warnings_on_stderr``);
the shared cluster and the fixtures of the Ray tests (``ray_cluster``, ``make_spec``, ``rows``, ``numbers``)
are tests/conftest.py's, for the Ray tests of every folder."""

import pytest

pytest.importorskip("ray", reason="the Ray pipeline tests need the 'ray' extra (make test installs it)")


@pytest.fixture(autouse=True)
def _warnings_on_stderr(library_warnings_on_stderr):
    yield
