from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"


@pytest.fixture
def agents_examples() -> Path:
    """examples/agents, whose modules (scripted_agent, predicates) pytest's pythonpath makes importable."""
    return EXAMPLES


@pytest.fixture
def scripted(agents_examples):
    import scripted_agent

    return scripted_agent
