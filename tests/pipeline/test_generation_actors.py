"""A run asked for more generation actors than it has shards says so (the
shard is the unit of work: the others would load their model for nothing),
on a real local Ray (2 CPUs, 4 logical GPUs)."""

import pytest

from auditkit_ray.api import evaluate

pytestmark = pytest.mark.usefixtures("ray_cluster")


def test_more_generation_actors_than_shards_warns_and_names_the_setting_that_helps(make_spec, capsys):
    # 40 samples in shards of 16: 3 shards, for 4 actors
    res = evaluate(make_spec("few", execution={"shard_size": 16, "generation_actors": 4}))
    err = capsys.readouterr().err
    assert "3 shards of 16 samples for 4 generation actors; 3 will run" in err
    assert "execution.shard_size" in err
    assert res.perf.samples == 40 and res.metrics["exact_match"].n == 40  # the run itself is whole

    # as many shards as actors: nothing to say
    evaluate(make_spec("enough", execution={"shard_size": 16, "generation_actors": 3}))
    assert "generation actors;" not in capsys.readouterr().err
