import pytest

from auditkit_ray import Sample


def _bad_sample(**fields):
    base = dict(id="x", input="q", target=None, choices=None, metadata={}, retrieved_contexts=None,
                gold_evidence=None, corpus_snapshot=None, tools=None, reference_tool_calls=None, expected_state=None)
    base.update(fields)
    return Sample.model_construct(**base)


@pytest.fixture
def bad_sample():
    """bad_sample(**fields) -> a Sample that skipped pydantic validation, as a
    wrongly shaped row would arrive from a reader or a user's code."""
    return _bad_sample
