"""The package as it ships: the sdist and wheel that `python -m build` makes,
and the offline bundle (`scripts/bundle.py`, `make bundle`) installed into a
fresh venv with no network.

One venv serves both checks, to build and install once: the bundle carries
the wheel built from the sdist here, so installing the bundle installs that
wheel, and `auditkit-ray --version`, the light-import check and the echo
quickstart then run on it, followed by a Ray evaluation on the `hf` backend.

What stands in for what, and why:
- The bundle is built for this interpreter's Python (the test has to run
  what it installs); `make bundle PY_VERSION=3.12` resolves the same way for
  another target. Building it downloads from PyPI, as CI can; installing it
  cannot: `install.sh` passes `--no-index`, pip's configuration files are
  switched off (PIP_CONFIG_FILE=/dev/null: on this machine they name local
  wheel folders and file:// indexes) and PIP_INDEX_URL names an address where
  nothing listens, so any look-up outside the bundle folder fails the install.
- The bundle is slim (`--slim`): the repacked Ray wheel is the part that can
  break, and the two evaluations below are `ray.data` pipelines run from it.
- The target node has torch and leaves it out of the bundle. The fresh venv
  gets torch as an installed distribution: the files of this checkout's
  torch and of the packages torch requires, hard-linked into the new venv's
  site-packages with their dist-info (what `pip install torch` would have
  unpacked there, in a second instead of the minute unpacking the 190 MB
  wheel takes on 2 cores). Nothing else is shared: the venv is made without
  --system-site-packages, and pydantic, Ray, pyarrow, transformers and the
  rest come from the bundle.
- No Docker daemon runs here, so the worker image (docker/Dockerfile) is
  linted (tests/packaging/test_dockerfile.py), not built.
"""

import base64
import csv
import errno
import hashlib
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = re.search(r'__version__ = "([^"]+)"', (ROOT / "auditkit_ray/_version.py").read_text()).group(1)
HEAVY = ["ray", "torch", "transformers", "vllm", "mlflow", "boto3", "kubernetes", "pyarrow", "lm_eval"]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0"}

pytestmark = pytest.mark.slow


def _run(cmd, *, cwd=None, env=None, timeout=600):
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd[:3]} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    return out


def _clean_env(venv_dir: Path) -> dict:
    """The environment of a shell on the node: this venv first on PATH, no
    pip settings of this machine, no index reachable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV", "RAY_ADDRESS"))}
    env.update(OFFLINE, PATH=f"{venv_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv_dir),
               PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_NO_CACHE_DIR="1")
    return env


def _requirement_closure(name: str) -> list[md.Distribution]:
    """`name` and every installed distribution it requires (markers for this
    interpreter, no extras)."""
    from packaging.requirements import Requirement

    seen: dict[str, md.Distribution] = {}
    todo = [name]
    while todo:
        n = todo.pop().lower().replace("_", "-")
        if n in seen:
            continue
        try:
            dist = md.distribution(n)
        except md.PackageNotFoundError:
            continue
        seen[n] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def _link_installed(dists: list[md.Distribution], py: Path, site: Path) -> None:
    """Hard-link each distribution's files into `site`. The venv's own copy of
    one (ensurepip's setuptools, older than torch asks for) is removed first,
    as pip would replace it."""
    names = [d.metadata["Name"] for d in dists]
    have = _run([py, "-c", "import importlib.metadata as m; print(*[d.metadata['Name'] for d in m.distributions()])"])
    again = sorted({n.lower() for n in names} & {n.lower() for n in have.stdout.split()})
    if again:
        _run([py, "-m", "pip", "uninstall", "--yes", "--quiet", *again],
             env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    for dist in dists:
        base = Path(dist.locate_file(""))
        for f in dist.files or []:
            if f.parts[0] == ".." or "__pycache__" in f.parts:
                continue  # console scripts outside site-packages and caches: not needed to import
            src, dst = base / f, site / f
            if not src.is_file():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                shutil.copy2(src, dst)  # another file system


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """sdist, then the wheel built from that sdist (python -m build's default
    order, so the wheel proves the sdist is complete)."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT], cwd=ROOT)
    [sdist] = out.glob("auditkit_ray-*.tar.gz")
    [wheel] = out.glob("auditkit_ray-*-py3-none-any.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def node(built, tmp_path_factory):
    """A fresh venv with torch installed, then the slim bundle installed into
    it by its install.sh with no index."""
    pytest.importorskip("torch", reason="the node's torch is linked from this venv's (make test installs it)")
    tmp = tmp_path_factory.mktemp("node")
    bundle = tmp / "bundle"
    _run([sys.executable, ROOT / "scripts/bundle.py", "--out", bundle, "--slim", "--wheel", built[1]], cwd=tmp)
    venv_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(venv_dir)
    py = venv_dir / "bin" / "python"
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    _link_installed(_requirement_closure("torch"), py, site)
    env = _clean_env(venv_dir)
    install = _run(["sh", bundle / "install.sh"], cwd=tmp, env={**env, "PYTHON": str(py)})
    return {"venv": venv_dir, "py": py, "env": env, "bundle": bundle, "tmp": tmp, "install": install}


def test_sdist_and_wheel_build_and_carry_the_package_data(built):
    sdist, wheel = built
    names = zipfile.ZipFile(wheel).namelist()
    assert "auditkit_ray/py.typed" in names
    assert any(n.startswith("auditkit_ray/lmeval/tasks/") and n.endswith(".yaml") for n in names)
    entry_points = zipfile.ZipFile(wheel).read(f"auditkit_ray-{VERSION}.dist-info/entry_points.txt").decode()
    assert "auditkit-ray = auditkit_ray.cli:entrypoint" in entry_points
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "README.md", "auditkit_ray/__init__.py"} <= members


def test_bundle_leaves_out_torch_and_ships_a_no_index_install_script(node):
    bundle = node["bundle"]
    wheels = {p.name.split("-")[0].lower() for p in bundle.glob("*.whl")}
    assert {"auditkit_ray", "ray", "pydantic", "pyarrow", "orjson", "transformers"} <= wheels
    assert not {w for w in wheels if w in ("torch", "triton") or w.startswith("nvidia")}, wheels
    script = (bundle / "install.sh").read_text()
    assert "--no-index" in script and '--find-links "$here"' in script
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["node_must_have"] == ["torch"] and manifest["slim"] is True
    # pip looked nowhere but the bundle folder
    assert "Looking in indexes" not in node["install"].stdout


def test_slim_ray_wheel_has_no_jars_rllib_serve_tune_train_and_a_valid_record(node):
    [ray_wheel] = node["bundle"].glob("ray-*.whl")
    z = zipfile.ZipFile(ray_wheel)
    names = z.namelist()
    for dropped in ("ray/jars/", "ray/rllib/", "ray/serve/", "ray/tune/", "ray/train/", "ray/llm/", "ray/workflow/"):
        assert not any(n.startswith(dropped) for n in names), dropped
    # RECORD lists exactly what the wheel holds, with each file's hash and size
    record = next(n for n in names if re.fullmatch(r"ray-[^/]+\.dist-info/RECORD", n))
    rows = {r[0]: r[1:] for r in csv.reader(z.read(record).decode().splitlines()) if r}
    assert set(rows) == {n for n in names if not n.endswith("/")}
    for name, (digest, size) in rows.items():
        if name != record:
            data = z.read(name)
            want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, size) == (want, str(len(data))), name
    site_ray = _run([node["py"], "-c", "import ray, os; print(os.path.dirname(ray.__file__))"],
                    cwd=node["tmp"], env=node["env"]).stdout.strip()
    assert site_ray.startswith(str(node["venv"])) and not os.path.exists(os.path.join(site_ray, "rllib"))


def test_installed_wheel_runs_version_and_imports_no_heavy_sdk(node):
    env, py = node["env"], node["py"]
    out = _run([node["venv"] / "bin" / "auditkit-ray", "--version"], cwd=node["tmp"], env=env)
    assert VERSION in out.stdout + out.stderr
    code = (
        "import sys, auditkit_ray, auditkit_ray.cli, auditkit_ray.config, auditkit_ray.backends;"
        "print(auditkit_ray.__file__);"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    where, heavy = _run([py, "-c", code], cwd=node["tmp"], env=env).stdout.split("\n")[-3:-1]
    assert where.startswith(str(node["venv"])), f"imported {where}, not the installed wheel"
    assert heavy == "", f"heavy modules imported at import time: {heavy}"


def test_echo_quickstart_runs_on_ray_from_the_offline_install(node, tmp_path):
    exe, env = node["venv"] / "bin" / "auditkit-ray", {**node["env"], "AUDITKIT_RAY_DB": str(tmp_path / "db.sqlite")}
    _run([exe, "init", tmp_path / "qs"], cwd=tmp_path, env=env)
    out = _run([exe, "run", "run.yaml", "--json"], cwd=tmp_path / "qs", env=env)
    result, _ = json.JSONDecoder().raw_decode(out.stdout[out.stdout.index("{"):])
    m = result["metrics"]
    assert m["exact_match@number"]["mean"] == 1.0 and m["exact_match"]["n"] == 8


def test_hf_backend_runs_the_tiny_model_on_ray_from_the_offline_install(node, tiny_model, tmp_path):
    env = {**node["env"], "AUDITKIT_RAY_DB": str(tmp_path / "db.sqlite")}
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i} plus 1?", "answer": str(i + 1)}) + "\n"
                            for i in range(6)))
    run = tmp_path / "hf.yaml"
    run.write_text(textwrap.dedent(f"""\
        name: offline-hf
        model: {{type: hf, path: {tiny_model}, dtype: float32, batch_size: 4}}
        dataset: {{path: {data}, id_field: id, input_field: question, target_field: answer}}
        prompt: {{template: "{{{{ question }}}} Answer:"}}
        generation: {{max_new_tokens: 4, temperature: 0}}
        metrics: [exact_match, non_degenerate]
        execution: {{shard_size: 3}}
        store: {{path: {tmp_path / 'results'}}}
        """))
    out = _run([node["venv"] / "bin" / "auditkit-ray", "run", run, "--json"], cwd=tmp_path, env=env)
    result, _ = json.JSONDecoder().raw_decode(out.stdout[out.stdout.index("{"):])
    assert result["metrics"]["exact_match"]["n"] == 6
    assert result["metrics"]["non_degenerate"]["n"] == 6


def _bundle_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bundle_script", ROOT / "scripts/bundle.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_install_script_refuses_another_python_and_a_node_without_torch(tmp_path):
    """A one-line reason and exit 2, before pip runs, for the two ways a bundle meets the wrong node."""
    bundle = _bundle_module()
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    env = {**os.environ, "PYTHON": sys.executable}
    other = tmp_path / "other"
    other.mkdir()
    bundle.write_install_sh(other, ["ray"], "3.99", VERSION, [])
    out = subprocess.run(["sh", other / "install.sh"], capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "this bundle is for Python 3.99" in out.stderr
    lacking = tmp_path / "lacking"
    lacking.mkdir()
    bundle.write_install_sh(lacking, ["hf"], here, VERSION, ["no-such-dist-for-auditkit"])
    out = subprocess.run(["sh", lacking / "install.sh"], capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "no-such-dist-for-auditkit is not installed" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
