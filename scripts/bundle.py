#!/usr/bin/env python
"""Write an offline bundle: a folder of wheels and an ``install.sh`` that
installs ``auditkit-ray[EXTRAS]`` from it with no network, for air-gapped
(GPU) nodes.

    python scripts/bundle.py                                # dist/bundle/, this Python, extras ray,hf
    python scripts/bundle.py --python-version 3.12 --slim   # for a Python 3.12 node, Ray slimmed
    make bundle PY_VERSION=3.12 SLIM=1                      # the same through make

The folder holds the project's own wheel (built from this checkout) and the
wheel of every dependency of the chosen extras for the target Python on
manylinux x86_64, as resolved by pip for that target, except torch and what
only torch needs (its CUDA libraries ``nvidia-*`` and ``triton``): GPU nodes
bring their own torch, built for their driver, and a pip resolution from here
would pick a multi-GB build that may not match it. ``--exclude NAME`` leaves
out more (a package the node already has, e.g. ``transformers``, and what
only it needs). ``install.sh`` checks the Python version and that torch is
present (for the ``hf`` extra) before it runs
``pip install --no-index --find-links <bundle> auditkit-ray[EXTRAS]``.

``--slim`` repacks the Ray wheel without what an evaluator never loads: the
Java jars, RLlib, Serve, Tune, Train, the LLM library, workflows and the
dashboard's source maps, with the symbols no loader needs stripped from
its binaries (``strip --strip-unneeded``, where ``strip`` exists: Ray's
wheels carry no DWARF, so ``--strip-debug`` gains nothing, while the symbol
tables are a quarter of raylet, gcs_server and _raylet.so; what the dynamic
linker reads stays); the wheel's RECORD is rewritten so pip installs it. ``ray.data`` pipelines (all the evaluator uses
of Ray) run from it: tests/packaging/test_bundle.py installs a slim bundle
and runs evaluations on it.

``--model DIR`` copies a model folder into ``<bundle>/models/``;
``--tarball`` also writes ``<bundle>.tar.xz`` and prints its size.
"""

from __future__ import annotations

import argparse
import base64
import csv
import fnmatch
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # pip carries its own copy
    from pip._vendor.packaging.requirements import Requirement  # noqa: PLC2701 - pip's vendored packaging, same API
    from pip._vendor.packaging.utils import canonicalize_name  # noqa: PLC2701

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "auditkit-ray"
DEFAULT_EXTRAS = "ray,hf"
# GPU nodes bring torch (built for their CUDA driver) and with it these
ALWAYS_EXCLUDED = ["torch", "nvidia-*", "triton"]
# newest first; pip matches a wheel tagged with any of them
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux2010_x86_64",
             "manylinux1_x86_64"]
# parts of the Ray wheel an evaluator never imports (it uses ray core, ray.data and the dashboard agent)
RAY_SLIM_DROP = ["ray/jars/*", "ray/rllib/*", "ray/serve/*", "ray/tune/*", "ray/train/*", "ray/llm/*",
                 "ray/workflow/*", "ray/data/llm.py", "ray/dashboard/client/build/*.map"]


class BundleError(Exception):
    pass


def _pip(*args: str, quiet: bool = True) -> None:
    cmd = [sys.executable, "-m", "pip", *args] + (["--quiet"] if quiet else [])
    proc = subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if proc.returncode:
        tail = "\n".join(line for line in proc.stdout.splitlines() if "is ignored" not in line)[-3000:]
        raise BundleError(f"pip {args[0]} failed:\n{tail}")


def _target_flags(py: str, platforms: list[str]) -> list[str]:
    nodot = py.replace(".", "")
    flags = ["--only-binary=:all:", "--python-version", py, "--implementation", "cp", "--abi", f"cp{nodot}",
             "--abi", "abi3", "--abi", "none"]
    for p in platforms:
        flags += ["--platform", p]
    return flags


def _marker_env(py: str) -> dict[str, str]:
    return {"python_version": py, "python_full_version": f"{py}.0", "implementation_name": "cpython",
            "implementation_version": f"{py}.0", "platform_python_implementation": "CPython",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
            "platform_release": "", "platform_version": ""}


def build_own_wheel(out: Path) -> Path:
    """The project's wheel from this checkout (``pip wheel``, with the
    setuptools already installed: no download)."""
    out.mkdir(parents=True, exist_ok=True)
    _pip("wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(out), str(ROOT))
    wheels = sorted(out.glob("auditkit_ray-*.whl"))
    if not wheels:
        raise BundleError(f"pip wheel wrote no auditkit_ray wheel into {out}")
    return wheels[-1]


def resolve(own_wheel: Path, extras: list[str], py: str, platforms: list[str]) -> list[dict]:
    """pip's resolution of ``auditkit-ray[extras]`` for the target: the
    ``install`` list of ``pip install --dry-run --report``."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        req = f"{PROJECT}[{','.join(extras)}] @ {own_wheel.resolve().as_uri()}"
        _pip("install", "--dry-run", "--ignore-installed", "--report", str(report), *_target_flags(py, platforms), req)
        return json.loads(report.read_text())["install"]


def _excluded(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(name, canonicalize_name(p)) for p in patterns)


def select(install: list[dict], extras: list[str], py: str, exclude: list[str]) -> tuple[list[dict], list[str]]:
    """The resolved packages reachable from the project with its extras
    without passing through an excluded one (torch's own dependencies, such
    as sympy and the CUDA libraries, go with it unless something else needs
    them), and the excluded packages that a chosen one requires: the node
    must have those."""
    by_name = {canonicalize_name(i["metadata"]["name"]): i for i in install}
    env = _marker_env(py)
    todo = [(canonicalize_name(PROJECT), frozenset(extras))]
    seen: dict[str, set[str]] = {}
    provided: set[str] = set()
    while todo:
        name, want = todo.pop()
        if _excluded(name, exclude):
            provided.add(name)
            continue
        if name not in by_name or (name in seen and want <= seen[name]):
            continue
        have = seen.setdefault(name, set())
        have |= want
        for text in by_name[name]["metadata"].get("requires_dist", []):
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in ("", *have)):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return [by_name[n] for n in sorted(seen)], sorted(provided)


def download(packages: list[dict], out: Path, py: str, platforms: list[str]) -> None:
    pins = [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in packages
            if canonicalize_name(i["metadata"]["name"]) != canonicalize_name(PROJECT)]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(pins) + "\n")
    try:
        _pip("download", "--no-deps", "--dest", str(out), *_target_flags(py, platforms), "-r", f.name)
    finally:
        os.unlink(f.name)


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _strip(data: bytes, strip: str) -> bytes:
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data)
    try:
        proc = subprocess.run([strip, "--strip-unneeded", f.name], capture_output=True)
        return Path(f.name).read_bytes() if proc.returncode == 0 else data
    finally:
        os.unlink(f.name)


def slim_ray(wheel: Path) -> tuple[int, int]:
    """Repack the Ray wheel in place without RAY_SLIM_DROP, binaries
    stripped, RECORD rewritten. Returns (old, new) sizes."""
    old = wheel.stat().st_size
    strip = shutil.which("strip")
    tmp = wheel.with_suffix(".tmp")
    rows: list[list[str]] = []
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst:
        record_name = next(n for n in src.namelist() if re.fullmatch(r"[^/]+\.dist-info/RECORD", n))
        for info in src.infolist():
            name = info.filename
            if name == record_name or any(fnmatch.fnmatch(name, p) for p in RAY_SLIM_DROP):
                continue
            data = src.read(info)
            if strip and data[:4] == b"\x7fELF":
                data = _strip(data, strip)
            out = zipfile.ZipInfo(name, date_time=info.date_time)
            out.external_attr = info.external_attr  # keeps the executables' mode (raylet, gcs_server)
            out.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(out, data)
            if not name.endswith("/"):
                rows.append([name, _record_hash(data), str(len(data))])
        rows.append([record_name, "", ""])
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        dst.writestr(zipfile.ZipInfo(record_name, date_time=(2020, 1, 1, 0, 0, 0)), buf.getvalue())
    tmp.replace(wheel)
    return old, wheel.stat().st_size


INSTALL_SH = """\
#!/bin/sh
# Installs {project}[{extras}] {version} from this folder, with no network:
#   sh install.sh                  # into the environment of `python3`
#   PYTHON=/path/to/python sh install.sh [more pip options, e.g. --user]
# Built for CPython {py} on Linux x86_64.{provided_note}
set -eu
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${{PYTHON:-python3}}
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != ({major}, {minor}))' || {{
    echo "install.sh: this bundle is for Python {py}; $PYTHON is $("$PYTHON" -V 2>&1)" >&2; exit 2; }}
{provided_check}exec "$PYTHON" -m pip install --no-index --find-links "$here" "$@" "{project}[{extras}]=={version}"
"""
PROVIDED_CHECK = """\
for dist in {names}; do
    "$PYTHON" -c 'import importlib.metadata as m, sys; m.version(sys.argv[1])' "$dist" 2>/dev/null || {{
        echo "install.sh: $dist is not installed in $PYTHON and this bundle leaves it out: install it first" \\
             "(torch: the build for this node's CUDA)" >&2; exit 2; }}
done
"""


def write_install_sh(out: Path, extras: list[str], py: str, version: str, provided: list[str]) -> Path:
    major, minor = py.split(".")
    names = " ".join(provided)
    text = INSTALL_SH.format(project=PROJECT, extras=",".join(extras), version=version, py=py, major=major,
                             minor=minor, provided_check=PROVIDED_CHECK.format(names=names) if provided else "",
                             provided_note=f"\n# Left out, the node must have them already: {names}." if provided
                             else "")
    path = out / "install.sh"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def tarball(out: Path) -> Path:
    tar = out.with_name(out.name + ".tar.xz")
    subprocess.run(["tar", "-C", str(out.parent), "-cf", str(tar), "--use-compress-program", "xz -T0 -6",
                    out.name], check=True)
    return tar


def make_bundle(out: Path, *, py: str, extras: list[str], exclude: list[str], slim: bool,
                wheel: Path | None = None, models: tuple[Path, ...] = (), platforms: list[str] = PLATFORMS) -> dict:
    if not re.fullmatch(r"3\.\d+", py):
        raise BundleError(f"--python-version {py!r}: expected MAJOR.MINOR such as 3.12")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        own = wheel if wheel else build_own_wheel(Path(tmp))
        shutil.copy2(own, out / own.name)
        excluded = ALWAYS_EXCLUDED + list(exclude)
        install = resolve(out / own.name, extras, py, platforms)
        chosen, provided = select(install, extras, py, excluded)
    download(chosen, out, py, platforms)
    sizes: dict[str, int] = {}
    if slim:
        rays = sorted(out.glob("ray-*.whl"))
        if not rays:
            raise BundleError("--slim: no Ray wheel in the bundle (extras without 'ray'?)")
        before, after = slim_ray(rays[0])
        sizes["ray_wheel_before"], sizes["ray_wheel_after"] = before, after
    for m in models:
        if not (m / "config.json").is_file():
            raise BundleError(f"--model {m}: no config.json there (build it with `make model`)")
        shutil.copytree(m, out / "models" / m.name)
    version = next(i["metadata"]["version"] for i in install if canonicalize_name(i["metadata"]["name"]) == PROJECT)
    write_install_sh(out, extras, py, version, provided)
    manifest = {"project": PROJECT, "version": version, "python": py, "extras": extras, "slim": slim,
                "excluded": excluded, "node_must_have": provided,
                "packages": {i["metadata"]["name"]: i["metadata"]["version"] for i in chosen}}
    (out / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    sizes["bundle"] = _dir_size(out)
    return {**manifest, "sizes": sizes}


def main(argv: list[str] | None = None) -> int:
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "dist" / "bundle")
    ap.add_argument("--python-version", default=here, help=f"target CPython MAJOR.MINOR (default {here})")
    ap.add_argument("--extras", default=DEFAULT_EXTRAS, help=f"comma-separated extras (default {DEFAULT_EXTRAS})")
    ap.add_argument("--exclude", action="append", default=[],
                    help="leave out this package (glob) and what only it needs; repeatable")
    ap.add_argument("--slim", action="store_true", help="repack Ray without what an evaluator never loads")
    ap.add_argument("--wheel", type=Path, default=None, help="the project's wheel, when already built")
    ap.add_argument("--model", type=Path, action="append", default=[], help="copy this model folder in")
    ap.add_argument("--tarball", action="store_true", help="also write <out>.tar.xz")
    args = ap.parse_args(argv)
    extras = [e.strip() for e in args.extras.split(",") if e.strip()]
    exclude = [p for x in args.exclude for p in x.replace(",", " ").split()]
    try:
        info = make_bundle(args.out, py=args.python_version, extras=extras, exclude=exclude, slim=args.slim,
                           wheel=args.wheel, models=tuple(args.model))
    except BundleError as exc:
        print(f"bundle: {exc}", file=sys.stderr)
        return 2
    mb = 1e6
    s = info["sizes"]
    print(f"bundle: {args.out} for CPython {info['python']}, {PROJECT}[{','.join(extras)}] {info['version']}, "
          f"{len(info['packages'])} wheels, {s['bundle'] / mb:.1f} MB; left out: {', '.join(info['excluded'])}")
    if args.slim:
        print(f"bundle: slim Ray wheel {s['ray_wheel_before'] / mb:.1f} MB -> {s['ray_wheel_after'] / mb:.1f} MB")
    if args.tarball:
        tar = tarball(args.out)
        print(f"bundle: {tar} {tar.stat().st_size / mb:.1f} MB")
    print(f"bundle: install on the node with: sh {args.out}/install.sh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
