"""A user metric the GPU tests' sweep uses to fail a cell after its model is on the GPU (imported by the
scoring workers as ``gpu_check_metrics:BreakOnSample``)."""

from auditkit_ray import Direction, Metric, Score


class CellBreaker(BaseException):
    """Not an ``Exception``: the metric runner keeps a metric's exceptions as per-sample errors, and this one
    has to fail the whole pipeline, as a worker that breaks does."""


class BreakOnSample(Metric):
    name = "break_on_sample"
    direction = Direction.MAXIMIZE

    def score(self, sample, generation, context):
        if sample.id == "q005":
            raise CellBreaker("the scoring worker broke on q005")
        return Score.scored(self.name, 1.0)
