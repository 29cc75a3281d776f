"""What travels between the stages (``actors.shard``): each stage checks the
fields it reads and fails naming itself and the field; and the one module
that touches Ray's private APIs (``cluster.compat``) fails naming Ray's
version when one is missing, and leaves Ray alone when it is not a Ray it
was written for."""

import pytest

from auditkit_ray.actors.generate import Generator
from auditkit_ray.actors.score import ScoreStage
from auditkit_ray.actors.shard import ShardPayload, StageFields, pack, planned_row, read_batch, unpack
from auditkit_ray.cluster import compat as ray_compat
from auditkit_ray.errors import RunError

pytestmark = pytest.mark.usefixtures("library_warnings_on_stderr")


def test_a_planned_row_unpacks_to_the_payload_the_driver_planned_and_takes_its_run_from_the_row():
    items = [{"request": {"sample_id": "a", "prompt": "p", "repeat": 0}}]
    row = planned_row(3, items, ["sample"])
    [(payload, cell)] = read_batch({k: [v] for k, v in {**row, "run": "fp"}.items()})
    assert payload == ShardPayload(shard=3, items=items, run="fp") and unpack(cell) == ["sample"]
    assert unpack(pack(payload)) == payload


def test_a_stage_given_a_shard_without_a_field_it_reads_names_itself_and_the_field():
    later = ScoreStage({}, pool="judges", first=False, final=True)
    shard = ShardPayload(shard=2, items=[], run="fp", generations=[], worker={})
    with pytest.raises(RunError, match=r"ScoreStage\(later pool, final\): shard 2 arrived without 'annotations'"):
        later.score_shard(shard, [])
    with pytest.raises(RunError, match="Generator: shard 2 arrived without 'run'"):
        Generator({}).generate_shard(ShardPayload(shard=2, items=[]))
    with pytest.raises(RunError, match="expected a ShardPayload, got dict"):
        Generator.fields.require({"shard": 2})
    with pytest.raises(ValueError, match="no such shard field"):
        StageFields("Mine", reads=("nonesuch",))


def test_only_the_first_scoring_pool_makes_or_reads_outputs():
    with pytest.raises(ValueError, match="only the first pool"):
        ScoreStage({}, pool="judges", first=False, generation="cached")


def test_a_missing_private_ray_api_fails_naming_ray_and_its_version(monkeypatch):
    import ray
    from ray.data._internal.execution import execution_callback

    assert ray_compat.written_for()  # the installed Ray is the one the adapter was written for
    monkeypatch.delattr(execution_callback, "ExecutionCallback")
    with pytest.raises(ray_compat.RayCompatError, match=rf"Ray {ray.__version__} has no ray\.data\._internal"):
        ray_compat.kill_actors_on_failure(object())


def test_with_a_ray_the_adapter_was_not_written_for_nothing_private_is_touched(monkeypatch):
    from ray.data._internal.execution import execution_callback

    monkeypatch.setattr(ray_compat, "RAY_WRITTEN_FOR", ((1, 0), (1, 99)))
    ray_compat.written_for.cache_clear()
    try:
        monkeypatch.delattr(execution_callback, "ExecutionCallback")
        ray_compat.kill_actors_on_failure(object())  # nothing raised: Ray Data is left as it is
        with ray_compat.quick_local_start(log_to_driver=False):
            pass
        assert ray_compat.global_node() is None
    finally:
        ray_compat.written_for.cache_clear()
