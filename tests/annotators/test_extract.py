import pytest
from pydantic import ValidationError

from auditkit_ray import Generation
from auditkit_ray.annotators import apply_annotators, build_annotator
from auditkit_ray.config.models import RegexAnnotator, StripReasoningAnnotator, TakeFirstAnnotator


def ann(*specs):
    return [(s.name, build_annotator(s)) for s in specs]


def test_regex_first_last_index_and_invalid():
    g = Generation(text="3 apples and 5 pears, total 8")
    fns = ann(
        RegexAnnotator(type="regex", name="first", pattern=r"(\d+)"),
        RegexAnnotator(type="regex", name="last", pattern=r"(\d+)", select="last"),
        RegexAnnotator(type="regex", name="second", pattern=r"(\d+)", select=1),
        RegexAnnotator(type="regex", name="none", pattern=r"(zzz)"),
        RegexAnnotator(type="regex", name="named", pattern=r"total (?P<n>\d+)", group="n"),
    )
    out = apply_annotators(fns, g)
    assert out == {"first": "3", "last": "8", "second": "5", "none": "[invalid]", "named": "8"}
    assert g.text == "3 apples and 5 pears, total 8" and g.raw_text == g.text  # never altered


def test_strip_reasoning_then_extract_chains_annotators():
    g = Generation(text="<think>maybe 7?</think> The answer is 9")
    out = apply_annotators(
        ann(StripReasoningAnnotator(type="strip_reasoning", name="clean"),
            RegexAnnotator(type="regex", name="num", pattern=r"(\d+)", on="clean")),
        g,
    )
    assert out == {"clean": "The answer is 9", "num": "9"}


def test_take_first_line():
    out = apply_annotators(ann(TakeFirstAnnotator(type="take_first", name="f")), Generation(text="\n 12 \nmore"))
    assert out["f"] == "12"


def test_failed_generation_gets_no_annotations():
    assert apply_annotators(ann(TakeFirstAnnotator(type="take_first", name="f")), Generation(error="x")) == {}


@pytest.mark.parametrize(
    "kw", [{"pattern": "("}, {"pattern": r"(\d+)", "group": 3}, {"pattern": r"(\d+)", "group": "nope"}]
)
def test_bad_regex_config_is_rejected(kw):
    with pytest.raises(ValidationError):
        RegexAnnotator(type="regex", name="x", **kw)


class _Model:
    """A TextModel (auditkit_ray.core.textmodel): records what it was asked."""

    def __init__(self, replies):
        self.replies, self.asked, self.built = replies, [], None

    def complete(self, prompts, ids):
        self.asked.append((prompts, ids))
        return [self.replies.get(p) for p in prompts]


def test_a_model_annotator_gets_its_model_from_the_factory_it_is_given():
    from auditkit_ray.annotators.extract import apply_annotators_batch
    from auditkit_ray.config.models import ModelAnnotator

    spec = ModelAnnotator(type="model", name="answer", judge={"type": "echo"}, prompt="R: {output}", max_new_tokens=4)
    model = _Model({"R: it is 4": " 4 \n"})

    def factory(backend, **settings):
        model.built = (backend, settings)
        return model

    fns = [("answer", build_annotator(spec, factory))]
    assert model.built == ({"type": "echo"}, {"max_new_tokens": 4, "prompt": "R: {output}"})
    gens = [Generation(text="it is 4"), Generation(error="boom"), Generation(text="no idea")]
    out = apply_annotators_batch(fns, gens, ["a", "b", "c"])
    assert out == [{"answer": "4"}, {}, {"answer": None}]
    assert model.asked == [(["R: it is 4", "R: no idea"], ["a#extract", "c#extract"])]
    assert gens[0].text == "it is 4"  # never altered


def test_a_model_annotator_without_a_factory_is_a_config_error():
    from auditkit_ray import ConfigError
    from auditkit_ray.config.models import ModelAnnotator

    with pytest.raises(ConfigError, match="text model"):
        build_annotator(ModelAnnotator(type="model", name="answer", judge={"type": "echo"}))
