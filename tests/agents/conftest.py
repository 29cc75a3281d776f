from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"


@pytest.fixture
def agents_examples(monkeypatch) -> Path:
    """examples/agents on sys.path (scripted_agent, predicates)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return EXAMPLES


@pytest.fixture
def scripted(agents_examples):
    import scripted_agent

    return scripted_agent
