"""The grid a set of runs spans, and retention across it."""

import pytest

from auditkit_ray.report.grid import detect_grid, retention_curves
from auditkit_ray.report.loader import expand_inputs


def test_the_grid_is_read_from_sweep_run_names(sweep_dir):
    runs = expand_inputs([sweep_dir]).runs
    grid = detect_grid(runs)
    assert grid.source == "names" and grid.params == ["path", "quantization"]
    assert grid.x_values() == ["tiny-model", "tiny-model-p25", "tiny-model-p50"]
    assert sorted(grid.series()) == ["quantization=None", "quantization=int8-dynamic"]


def test_retention_is_against_the_reference_and_reads_direction(sweep_dir, sweep_runs, report_of):
    report = report_of(sweep_dir)
    # one curve set per grid axis: the checkpoint axis here, one series per quantization
    curves = {c.metric: c for c in retention_curves(report) if c.x_param == "path"}
    assert curves["exact_match"].reference == "tiny/path=tiny-model/quantization=None"
    none = dict((x, v) for x, v, _ in curves["exact_match"].series["quantization=None"])
    assert none["tiny-model"] == 1.0 and none["tiny-model-p50"] == pytest.approx(0.60 / 0.90)
    # output_length is lower-is-better: longer outputs retain less than 1
    ol = dict((x, v) for x, v, _ in curves["output_length"].series["quantization=None"])
    base = report.runs[0].result.metrics["output_length"].mean
    p50 = report.runs[2].result.metrics["output_length"].mean
    assert p50 > base and ol["tiny-model-p50"] == pytest.approx(base / p50) and ol["tiny-model-p50"] < 1
    # a baseline moves the reference
    report = report_of(sweep_dir, baseline=str(sweep_runs[3]))
    q = dict(
        (x, v)
        for x, v, _ in {c.metric: c for c in retention_curves(report) if c.x_param == "path"}["exact_match"].series[
            "quantization=int8-dynamic"
        ]
    )
    assert q["tiny-model"] == 1.0


def test_without_names_the_grid_comes_from_the_configs(tmp_path, kit):
    dirs = [
        kit.write_run(
            tmp_path,
            f"run-{i}",
            accuracy=0.5 + 0.1 * i,
            seed=i,
            config={
                "name": f"run-{i}",
                "model": {"type": "hf", "path": f"/m/ckpt-{i}"},
                "store": {"path": str(tmp_path)},
            },
        )
        for i in range(3)
    ]
    runs = expand_inputs(dirs).runs
    grid = detect_grid(runs)
    assert grid.source == "config" and grid.params == ["path"] and grid.x_values() == ["ckpt-0", "ckpt-1", "ckpt-2"]
    assert detect_grid(runs[:1]) is None
