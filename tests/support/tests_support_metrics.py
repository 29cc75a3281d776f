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


class SlowJudge(Metric):
    """A stand-in judge (family 'judge' -> the judges pool) that records its pid."""

    name = "slow_judge"
    direction = Direction.MAXIMIZE
    family = "judge"

    def score(self, sample, generation, context):
        import os
        import time

        time.sleep(0.01)
        return Score.scored(self.name, 1.0, metadata={"pid": os.getpid()})


class PidOracle(Metric):
    name = "pid_oracle"
    direction = Direction.MAXIMIZE
    family = "oracle"

    def score(self, sample, generation, context):
        import os

        return Score.scored(self.name, 1.0, metadata={"pid": os.getpid()})
