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


class AwkwardMetadata(Metric):
    """Metadata that JSON writers treat differently: an integer beyond 64
    bits, a NaN, non-ASCII text, a date and a set."""

    name = "awkward_metadata"
    direction = Direction.MAXIMIZE

    def score(self, sample, generation, context):
        import datetime
        import math

        return Score.scored(self.name, 1.0, metadata={"big": 2**70 + 1, "ratio": math.nan, "word": "日本 café",
                                                      "day": datetime.date(2024, 6, 1), "groups": {"staff"}})
