"""A record of Ray's logger is one write to stderr, and all of it goes to the command's log file, the unindented
lines of a chained traceback in it included (a sweep interrupted while Ray Data's forwarder was mid-call printed
its "Unhandled error" record's tail on the terminal). Ray's own logger and handler, in a child process with the
console script's filter; no cluster is started: the record is logged the way Ray's driver logs it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from console import check_clean_stderr

CHILD = textwrap.dedent('''
    import logging, sys
    from auditkit_ray.cli import noise
    noise.filter_foreign_lines(False)
    import ray  # noqa: F401  (its logging configuration: the handler that writes to sys.stderr)
    try:
        try:
            raise RuntimeError("the generation actors were lost")
        except RuntimeError as inner:
            raise ValueError("UDF failed to process a data block.") from inner
    except ValueError as exc:
        import traceback
        text = "".join(traceback.format_exception(exc))
    logging.getLogger("ray._private.worker").error(
        "Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): " + text
        + "\\nFailed to apply UDF transform after 1/1 attempts.")
    print("terminated: sweep sw: 0 of 40 shards are stored", file=sys.stderr)
    noise.set_exit_code(143)
    sys.exit(143)
''')


def test_a_ray_logger_record_with_a_chained_traceback_goes_to_the_log_whole(tmp_path):
    (tmp_path / "worker.py").write_text(CHILD)  # a file, so the record names it as Ray's names worker.py
    r = subprocess.run([sys.executable, "worker.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 143, r.stderr
    assert lines[0] == "terminated: sweep sw: 0 of 40 shards are stored", r.stderr
    assert len(lines) == 2 and lines[1].startswith("(Ray and library log lines of this command: "), r.stderr
    check_clean_stderr(r.stderr)
    log = Path(lines[1].split(": ", 1)[1].rstrip(")")).read_text()
    for part in ("Unhandled error", "Traceback (most recent call last)", "RuntimeError: the generation actors",
                 "The above exception was the direct cause", "ValueError: UDF failed", "Failed to apply UDF"):
        assert part in log, (part, log)
    assert "\x01" not in log, log
