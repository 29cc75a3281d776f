"""Entrypoint for `ray job submit`: run a sweep (or a single run file) on the
cluster the job runs in.

    ray job submit --working-dir . -- python jobs/run_sweep.py --config jobs/examples/pruning_grid.yaml

Inside a Ray job RAY_ADDRESS is set, so the driver joins the cluster instead
of starting a local Ray. Results go to the sweep's store.path: use an s3://
store on clusters whose nodes do not share a disk, so that a job retried on a
fresh cluster resumes from the finished shards.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="run an auditkit-ray sweep or run file inside a Ray job")
    ap.add_argument("--config", required=True, help="sweep or run file (YAML/JSON)")
    ap.add_argument("--store", default=None, help="override the result store (e.g. s3://bucket/prefix)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan only")
    a = ap.parse_args(argv)

    from auditkit_ray.cli import main as cli

    cmd = ["sweep", a.config]
    if a.store:
        cmd += ["--store", a.store]
    if a.dry_run:
        cmd.append("--dry-run")
    return cli(cmd)


if __name__ == "__main__":
    sys.exit(main())
