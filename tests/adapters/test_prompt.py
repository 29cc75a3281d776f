import pytest

from auditkit_ray import DataError, Sample
from auditkit_ray.adapters import PromptAdapter, render
from auditkit_ray.config.models import DatasetSpec, FewShotSpec, PromptSpec

DS = DatasetSpec(path="x", input_field="q", target_field="a")
POOL = [(f"p{i}", {"q": f"question {i}", "a": str(i)}) for i in range(10)]


def test_render_dotted_paths_and_missing_field_names_the_sample():
    assert render("{{ a.b }}-{{c}}", {"a": {"b": 1}, "c": "x"}) == "1-x"
    with pytest.raises(DataError) as exc:
        render("{{ nope }}", {"q": 1}, "s-9")
    assert "s-9" in str(exc.value) and "nope" in str(exc.value)


def test_few_shot_is_deterministic_per_sample_and_excludes_the_sample_itself():
    spec = PromptSpec(template="Q: {{ q }}\nA:", few_shot=FewShotSpec(n=3, seed=1))
    ad = PromptAdapter(spec, DS, seed=0, pool=POOL)
    s = Sample(id="p4", input="question 4", target="4")
    a = ad.build(s, {"q": "question 4", "a": "4"})
    assert a == ad.build(s, {"q": "question 4", "a": "4"})
    assert a.count("Q: ") == 4 and a.endswith("Q: question 4\nA:") and a.count("question 4") == 1
    other = PromptAdapter(PromptSpec(template="Q: {{ q }}\nA:", few_shot=FewShotSpec(n=3, seed=2)), DS, 0, POOL)
    assert other.build(s, {"q": "question 4", "a": "4"}) != a


def test_chat_prompt_builds_messages_with_system_and_shots():
    spec = PromptSpec(template="{{ q }}", system="Be brief.", chat=True, few_shot=FewShotSpec(n=1))
    msgs = PromptAdapter(spec, DS, 0, POOL).build(Sample(id="z", input="hi"), {"q": "hi"})
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[-1]["content"] == "hi"


def test_no_template_uses_the_input_field():
    ad = PromptAdapter(PromptSpec(), DS, 0)
    assert ad.build(Sample(id="1", input="hello"), {"q": "hello"}) == "hello"
