"""User-style metrics for tests, imported by workers as 'module:Class'."""

from auditkit_ray import Direction, Metric, Score


class AllRepeatsAgree(Metric):
    name = "all_repeats_agree"
    direction = Direction.MAXIMIZE
    scope = "group"

    def score(self, sample, generation, context):  # pragma: no cover - group metric
        raise AssertionError("score_group is used")

    def score_group(self, sample, generations, contexts):
        assert len(generations) == 3, len(generations)
        return Score.scored(self.name, float(len({g.text for g in generations}) == 1))
