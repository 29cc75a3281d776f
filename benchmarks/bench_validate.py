#!/usr/bin/env python
"""Validating a large sweep: ``auditkit-ray validate`` on grids of 500 to 50,000 cells (issue 56).

    python benchmarks/bench_validate.py [--smoke | --quick | --full] [--repeats N] [--before TREE]

``init``'s starter sweep (the echo backend, 8 samples) with its grid widened to N cells (``seed`` x
``generation.temperature`` x the starter's two ``model.field`` values); each file is validated by the real
console script in its own process, timed from outside (wall, CPU of the process, peak memory), the best
of ``--repeats``. The baselines, measured in the same run: the starter's run file (the fixed cost: start-up,
reading the dataset once), and the smallest grid. Figures: the cost of one run (what is above the fixed cost,
over the runs), and its ratio at the largest grid against the 5,000-cell grid (1.0: linear; the quadratic
duplicate-name check and the second expansion this replaced grew it with the grid). Also: a 50,000-cell grid
whose last cell is invalid, rejected in one line naming that cell.

Goal (issue 56): a 50,000-cell grid validates in seconds, linearly: ``goal.per_run_linear`` (the cost of one
run at the largest grid within 1.5x the 5,000-cell grid's).

``--before TREE``: also validate each grid once with the package of another source tree on PYTHONPATH (a
checkout of the commit before issue 56: ``git archive 6872660 auditkit_ray | tar -x -C TREE``), for the
ratio of the two in the same run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CLI, PY, Recorder, note, parser, print_machine, rmtree, with_tmpdir  # noqa: E402

#: the run and sweep files of `init`, written by the package itself
from auditkit_ray.init_templates import files as starter_files  # noqa: E402

#: runs one command and prints its wall time, CPU time (user + system) and peak memory as JSON
_MEASURE = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - t
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": r.returncode, "wall": wall, "cpu": u.ru_utime + u.ru_stime, "rss_mib": u.ru_maxrss / 1024,
                  "stderr": r.stderr[-2000:]}))
"""

SIZES = {"smoke": [500, 5000], "quick": [500, 5000, 50_000], "full": [500, 5000, 20_000, 50_000]}


def grid_text(sweep: str, cells: int, bad_last: bool = False) -> str:
    """The starter sweep with ``cells`` runs: generation.temperature x model.field (2) x seed, temperature
    the slowest axis (``bad_last``: the last temperature is -1, so only the last runs, 2% of them, are
    invalid: the whole grid is expanded before the error)."""
    temps = 50 if cells >= 5000 else 5
    seeds = cells // (2 * temps)
    assert 2 * temps * seeds == cells, cells
    values = [i / 100 for i in range(temps)]
    if bad_last:
        values[-1] = -1
    return (sweep.split("\ngrid:")[0] + f"\ngrid:\n  generation.temperature: {values}\n"
            f"  model.field: [target, prompt]\n  seed: {list(range(seeds))}\n")


def measure(path: Path, cwd: Path, repeats: int, tree: str | None = None) -> dict:
    """The best (least CPU) of ``repeats`` runs of ``validate PATH`` (``tree``: with that source tree's
    package first on the path)."""
    best = None
    env = {**os.environ, **({"PYTHONPATH": tree} if tree else {})}
    for _ in range(repeats):
        out = subprocess.run([PY, "-c", _MEASURE, CLI, "validate", str(path)], cwd=cwd, capture_output=True,
                             text=True, check=True, env=env)
        m = json.loads(out.stdout)
        if best is None or m["cpu"] < best["cpu"]:
            best = m
    return best


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=None, help="runs per file, the best kept (default: by mode)")
    ap.add_argument("--before", metavar="TREE", help="also validate each grid with this source tree's package")
    a = ap.parse_args(argv)
    print_machine()
    rec = Recorder("validate", a.mode)
    repeats = a.repeats or (1 if a.mode == "smoke" else 3)
    sizes = SIZES[a.mode]
    rec.setting(sizes=sizes, repeats=repeats, before=a.before)
    work = with_tmpdir("validate-")
    try:
        for rel, text in starter_files().items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        sweep = (work / "sweep.yaml").read_text()
        fixed = measure(work / "run.yaml", work, repeats)
        assert fixed["rc"] == 0, fixed["stderr"]
        rec.emit("validate.run_file.wall", fixed["wall"], "s")
        rec.emit("validate.run_file.cpu", fixed["cpu"], "s")
        per_run: dict[int, float] = {}
        for n in sizes:
            path = work / f"grid{n}.yaml"
            path.write_text(grid_text(sweep, n))
            note(f"validate: {n:,} cells")
            m = measure(path, work, repeats)
            assert m["rc"] == 0, m["stderr"]
            per_run[n] = max(m["cpu"] - fixed["cpu"], 0.0) / n
            rec.emit(f"validate.grid{n}.wall", m["wall"], "s")
            rec.emit(f"validate.grid{n}.cpu", m["cpu"], "s")
            rec.emit(f"validate.grid{n}.peak_rss", m["rss_mib"], "MiB")
            rec.emit(f"validate.grid{n}.per_run", per_run[n] * 1e6, "us cpu")
            if a.before:
                old = measure(path, work, 1, a.before)
                rec.emit(f"validate.before.grid{n}.cpu", old["cpu"], "s")
                rec.emit(f"validate.before.grid{n}.peak_rss", old["rss_mib"], "MiB")
                rec.emit(f"validate.ratio.cpu.grid{n}.now_vs_before", m["cpu"] / old["cpu"], "x")
        big = sizes[-1]
        ratio = per_run[big] / per_run[5000] if per_run[5000] else float("nan")
        rec.emit(f"validate.ratio.per_run.grid{big}_vs_grid5000", ratio, "x")
        rec.emit(f"validate.ratio.cpu.grid{big}_vs_grid{sizes[0]}",
                 (per_run[big] * big + fixed["cpu"]) / (per_run[sizes[0]] * sizes[0] + fixed["cpu"]), "x")
        bad = work / f"grid{big}-bad.yaml"
        bad.write_text(grid_text(sweep, big, bad_last=True))
        m = measure(bad, work, 1)
        lines = m["stderr"].strip().splitlines()
        names = m["rc"] == 2 and len(lines) == 1 and "/temperature=-1/field=target/seed=0):" in lines[0]
        rec.emit(f"validate.grid{big}_bad_cell.wall", m["wall"], "s")
        rec.emit(f"validate.grid{big}_bad_cell.one_line_naming_the_cell", names)
        rec.goal("per_run_linear", ratio <= 1.5 if a.mode != "smoke" else None,
                 f"one run's cost at {big:,} cells {ratio:.2f}x its cost at 5,000")
    finally:
        rmtree(work)
    rec.save(a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
