import pytest

from auditkit_ray.agents.canon import canonical, diff_paths, json_equal, json_subset


@pytest.mark.parametrize("a, b, equal", [
    (1, 1.0, True),
    ({"x": [1, {"y": 2.0}]}, {"x": [1.0, {"y": 2}]}, True),
    (True, 1, False),
    (False, 0, False),
    ({"x": [True]}, {"x": [1]}, False),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
    ([1, 2], [2, 1], False),
    ("1", 1, False),
    (None, 0, False),
    ({"a": None}, {}, False),
])
def test_json_equal_treats_1_and_1_0_alike_but_not_true_and_1_at_any_depth(a, b, equal):
    assert json_equal(a, b) is equal
    assert (canonical(a) == canonical(b)) is equal


def test_json_subset_is_recursive_on_objects_and_exact_on_arrays():
    actual = {"accounts": {"checking": 50.0, "savings": 150, "extra": 1}, "log": [1, 2]}
    assert json_subset({"accounts": {"checking": 50}}, actual)
    assert not json_subset({"accounts": {"checking": True}}, actual)
    assert not json_subset({"log": [1]}, actual)
    assert list(diff_paths({"accounts": {"checking": 40}}, actual, subset=True)) == [
        "$.accounts.checking: expected 40, got 50"]
    assert "$.accounts.extra: unexpected" in list(
        diff_paths({"accounts": {"checking": 50, "savings": 150}}, actual, subset=False)
    )
