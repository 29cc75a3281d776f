"""Fixtures of the viewer tests: result stores written directly by ``auditkit_ray.testing.runs`` (RunResult JSON +
per-sample Parquet shards; no Ray), the real ``auditkit-ray view`` started as a subprocess through the console
script, and the system Chromium driven by Playwright (``executable_path``; no downloaded browser)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from auditkit_ray.testing import runs as stored

SECRET = "sk-live-VIEWERSECRET-0123456789abcdef"
XSS = "<script>alert(1)</script>"
EXE = Path(sys.executable).parent / "auditkit-ray"
BIG = 100_000
#: screenshots kept after the run (the report tests keep theirs there too)
ARTIFACTS = Path(__file__).resolve().parents[2] / "results" / "test-artifacts" / "viewer"


def fp_of(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def write_run(store: Path, name: str, *, n: int, right: Any, config: dict | None = None, outputs: dict | None = None,
              created_at: str = "2026-03-01T10:00:00+00:00", shard_size: int = 25_000) -> str:
    """A finished run under ``store/runs/<fp>/`` with ``n`` samples ``s000000``...; ``right(i)`` decides
    exact_match; ``outputs`` overrides the raw output of some sample ids. Returns the fingerprint."""
    fp = fp_of(name, n, created_at)
    outputs = outputs or {}
    rows = []
    for i in range(n):
        sid = f"s{i:06d}"
        ok = bool(right(i))
        answer = str(i % 97) if ok else str(i % 97 + 1)
        raw = outputs.get(sid, f"The answer is {answer}.")
        rows.append({"sample_id": sid, "prompt": f"question {i}: what is {i} mod 97?", "target": str(i % 97),
                     "text": raw, "raw_text": raw, "annotations": {"number": answer}, "latency_s": 0.01,
                     "scores": [{"name": "exact_match", "status": "scored", "value": 1.0 if ok else 0.0,
                                 "reason": "matches the target" if ok else f"extracted {answer} != target {i % 97}"},
                                {"name": "length", "status": "scored", "value": float(len(raw)), "reason": None}]})
    stored.write_run(rows, name=name, store=store, fingerprint=fp, metrics={"length": {"direction": "minimize"}},
                   shard_size=shard_size, generation_fingerprint=fp_of("gen", fp), dataset_fingerprint="d" * 64,
                   seed=0, config=config or {"name": name},
                   perf={"samples": n, "wall_s": 12.5, "throughput_samples_per_s": n / 12.5, "latency_p50_s": 0.02,
                         "cost": 0.42},
                   tokens={"prompt": 10 * n, "completion": 4 * n, "source": "engine"}, backend={"type": "api"},
                   created_at=created_at)
    return fp


def write_sweep(store: Path, name: str, runs: list[tuple[str, str]], decision: dict | None = None) -> str:
    sfp = fp_of("sweep", name, runs)
    stored.write_sweep(store, name, [{"name": n, "fingerprint": f} for n, f in runs], fingerprint=sfp,
                       decision=decision)
    return sfp


def config_of(name: str, model: str, **model_extra: Any) -> dict:
    return {"name": name, "model": {"type": "api", "model": model, **model_extra},
            "dataset": {"path": "arith.jsonl"}, "store": {"path": "results"}}


@pytest.fixture(scope="session")
def stores(tmp_path_factory) -> dict[str, Any]:
    """One store: a baseline and a candidate (the candidate configured with an api_key, one output hostile
    HTML), a sweep of the two, a run of 100,000 samples; and a run in a folder outside the store."""
    pytest.importorskip("pyarrow", reason="the stores are Parquet: the 'view' extra")
    root = tmp_path_factory.mktemp("viewer")
    store = root / "store"
    base = write_run(store, "arith/baseline", n=200, right=lambda i: i % 4 != 0,
                     config=config_of("arith/baseline", "model-alpha"), created_at="2026-02-01T09:00:00+00:00")
    cand = write_run(store, "arith/candidate", n=200, right=lambda i: i % 5 != 0,
                     config=config_of("arith/candidate", "model-beta", api_key=SECRET,
                                      headers={"Authorization": f"Bearer {SECRET}"}),
                     outputs={"s000003": XSS}, created_at="2026-03-01T09:00:00+00:00")
    big = write_run(store, "arith/big", n=BIG, right=lambda i: i % 3 != 0,
                    config=config_of("arith/big", "model-gamma"), created_at="2026-03-05T09:00:00+00:00")
    # the sweep ran with a decision: section (issue 52): its page and report lead with it
    sweep = write_sweep(store, "alpha-vs-beta", [("arith/baseline", base), ("arith/candidate", cand)],
                        decision={"metric": "exact_match", "baseline": "arith/baseline", "margin": 0.05,
                                  "confidence": 0.95, "prefer": ["size", "latency", "cost"], "method": "auto"})
    outside = write_run(root / "elsewhere", "outside/run", n=10, right=lambda i: True)
    return {"store": store, "baseline": base, "candidate": cand, "big": big, "sweep": sweep, "outside": outside,
            "root": root}


class Viewer:
    """A running ``auditkit-ray view``: its URL (as printed), and its stderr log."""

    def __init__(self, args: list[str], log: Path, env: dict | None = None) -> None:
        self.log = log
        self.proc = subprocess.Popen([str(EXE), "view", *args], stdout=subprocess.PIPE, stderr=open(log, "w"),
                                     text=True, env={**os.environ, **(env or {})})
        line = self.proc.stdout.readline()  # the server prints the URL on one line once it listens
        if not line.startswith("auditkit-ray view: serving "):
            self.proc.kill()
            raise AssertionError(f"no URL line from the viewer: {line!r}\n{log.read_text()}")
        self.url = line.split("serving ", 1)[1].strip()
        self.lines = [line]
        threading.Thread(target=self._drain, daemon=True).start()
        self.base = self.url.split("?", 1)[0].rstrip("/")

    def _drain(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def http(url: str, *, method: str = "GET", headers: dict | None = None) -> tuple[int, str]:
    """(status, body) of a plain request, errors included."""
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


@pytest.fixture(scope="session")
def viewer(stores, tmp_path_factory):
    v = Viewer(["--store", str(stores["store"]), "--port", "0", "--log-requests"],
               tmp_path_factory.mktemp("viewer-log") / "view.log")
    yield v
    v.stop()


@pytest.fixture(scope="session")
def chromium_browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python (the dev extra)")
    binary = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(binary).exists():
        pytest.fail("chromium is not installed; install it with: apt-get update && apt-get install -y chromium",
                    pytrace=False)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=binary, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        yield browser
        browser.close()


def wait_rendered(pg, before: int = 0, timeout_s: float = 30) -> None:
    """Until the page has finished a render after ``before`` ones. Polled with ``evaluate`` (the protocol's
    callFunctionOn): ``wait_for_function`` compiles its predicate with eval, which the viewer's CSP forbids."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            done = pg.evaluate("() => Number(document.body.dataset.renders || 0) > %d "
                               "&& document.body.dataset.ready === '1'" % before)
        except Exception:  # noqa: BLE001 - the document is being replaced
            done = False
        if done:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the page did not render within {timeout_s}s: {pg.url}")
        pg.wait_for_timeout(20)


@pytest.fixture
def page(chromium_browser, tmp_path, request):
    """A fresh page that records every response body and every dialog; screenshots go to the test's tmp dir."""
    context = chromium_browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.bodies = []  # (url, status, body text)
    pg.dialogs = []
    pg.errors = []

    def on_response(resp):
        try:
            pg.bodies.append((resp.url, resp.status, resp.body().decode("utf-8", "replace")))
        except Exception as exc:  # noqa: BLE001 - a body the browser dropped (a redirect) is noted, not fatal
            pg.bodies.append((resp.url, resp.status, f"<unreadable: {exc}>"))

    def on_dialog(d):
        pg.dialogs.append(d.message)
        d.dismiss()

    pg.on("response", on_response)
    pg.on("dialog", on_dialog)
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.shots = tmp_path / "screenshots"
    pg.shots.mkdir()

    def shot(name: str) -> Path:
        path = pg.shots / f"{name}.png"
        pg.screenshot(path=str(path), full_page=False)
        # kept past the test's tmp folder, beside the report's screenshots (git-ignored)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, ARTIFACTS / path.name)
        print(f"screenshot: {ARTIFACTS / path.name}")
        return path

    def renders() -> int:
        try:
            return int(pg.evaluate("Number(document.body && document.body.dataset.renders || 0)"))
        except Exception:  # noqa: BLE001 - no document yet
            return 0

    def act(fn, new_document: bool = False) -> None:
        """Run ``fn`` (a click, a navigation) and wait until the page has rendered once more."""
        before = 0 if new_document or not pg.url.startswith("http") else renders()
        fn()
        wait_rendered(pg, before)

    def open_(url: str) -> None:
        same = pg.url.split("#")[0] == url.split("#")[0] and "#" in url
        act(lambda: pg.goto(url), new_document=not same)

    pg.shot, pg.open, pg.act = shot, open_, act
    yield pg
    context.close()


@pytest.fixture(scope="session")
def kit():
    import types

    return types.SimpleNamespace(SECRET=SECRET, XSS=XSS, BIG=BIG, http=http, Viewer=Viewer, write_run=write_run,
                                 config_of=config_of, wait_rendered=wait_rendered)
