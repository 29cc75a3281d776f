"""The viewer's security model, against the real server: hostile output stays text, no path outside the stores
is served, no secret reaches a response, it is read-only, and a non-loopback bind needs the token."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.timeout(120)


def raw_get(base: str, path: str, headers: dict | None = None) -> tuple[int, str]:
    """A GET with ``path`` sent exactly as written (no client-side normalisation of ``..``)."""
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read().decode("utf-8", "replace")
    conn.close()
    return resp.status, body


def test_a_script_in_an_output_renders_as_text_and_never_runs(viewer, page, stores, kit):
    page.open(viewer.base + f"/#/run/{stores['candidate']}?q=s000003")
    raw = page.locator("tr.sample pre.raw")
    assert raw.count() == 1
    assert raw.text_content() == kit.XSS  # the markup shows as characters
    assert page.locator("#app script").count() == 0  # and never became an element
    page.wait_for_timeout(200)
    assert page.dialogs == [] and page.errors == []
    page.shot("hostile-output")


@pytest.mark.parametrize("path", [
    "/../../etc/passwd", "/static/../../etc/passwd", "/static/%2e%2e/%2e%2e/etc/passwd",
    "/static/..%2f..%2fetc%2fpasswd", "/%2e%2e/%2e%2e/etc/passwd", "/api/run/..%2f..%2fetc%2fpasswd",
    "/api/run/../../../etc/passwd/samples", "/static/app.js/../../../../etc/passwd", "/etc/passwd",
])
def test_a_request_for_etc_passwd_is_refused(viewer, path):
    status, body = raw_get(viewer.base, path)
    assert status in (400, 403, 404), (path, status)
    assert "root:" not in body


def test_a_run_outside_the_configured_stores_is_refused(viewer, stores):
    # the run exists on disk, in a folder the viewer was not given: it is not reachable by fingerprint
    status, body = raw_get(viewer.base, f"/api/run/{stores['outside']}")
    assert status == 404 and "no finished run" in json.loads(body)["error"]
    status, _ = raw_get(viewer.base, f"/api/run/{stores['outside']}/samples")
    assert status == 404
    status, _ = raw_get(viewer.base, f"/api/diff?a={stores['baseline']}&b={stores['outside']}")
    assert status == 404


def test_the_api_key_of_a_run_reaches_no_response(viewer, page, stores, kit):
    page.open(viewer.url)
    page.open(viewer.base + f"/#/run/{stores['candidate']}")
    page.click("#config summary")
    config = json.loads(page.locator("#config-json").text_content())
    assert config["model"]["api_key"] == "***" and config["model"]["headers"]["Authorization"] == "***"
    page.open(viewer.base + f"/#/diff?a={stores['baseline']}&b={stores['candidate']}")
    page.open(viewer.base + f"/#/sweep/{stores['sweep']}")
    page.frame_locator("iframe.report").locator("html[data-ready='true']").wait_for(timeout=30_000)
    urls = [u for u, _, _ in page.bodies]
    for part in ("/api/runs", f"/api/run/{stores['candidate']}", "/samples?", "/api/diff?", "/report.html"):
        assert any(part in u for u in urls), (part, urls)  # every kind of answer was collected
    leaked = [u for u, _, body in page.bodies if kit.SECRET in body or kit.SECRET[8:] in body]
    assert leaked == []
    print(f"{len(page.bodies)} response bodies checked")


def test_only_get_is_served(viewer, kit):
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, _ = kit.http(viewer.base + "/api/runs", method=method)
        assert status == 405, method


def test_a_non_loopback_host_refuses_a_request_without_the_token(stores, tmp_path, kit, page):
    v = kit.Viewer(["--store", str(stores["store"]), "--host", "0.0.0.0", "--port", "0"], tmp_path / "view.log")
    try:
        assert "?token=" in v.url
        token = v.url.split("?token=", 1)[1]
        assert len(token) >= 16
        for path in ("/", "/api/runs", f"/api/run/{stores['baseline']}", "/static/app.js"):
            assert kit.http(v.base + path)[0] == 401, path
        assert kit.http(v.base + "/api/runs", headers={"X-Auditkit-Token": "wrong" * 5})[0] == 401
        status, body = kit.http(v.base + "/api/runs", headers={"X-Auditkit-Token": token})
        assert status == 200 and len(json.loads(body)["runs"]) == 3
        assert kit.http(v.base + "/api/runs?token=" + token)[0] == 200
        # the browser follows the printed URL once; the cookie it gets carries the rest of the session
        page.open(v.url)
        assert page.locator("tbody tr[data-fp]").count() == 3
        page.open(v.base + f"/#/run/{stores['baseline']}")
        assert page.locator("#run-fp").text_content() == stores["baseline"]
    finally:
        v.stop()


def test_a_given_token_is_the_one_required(stores, tmp_path, kit):
    token = "a-token-given-on-the-command-line"
    v = kit.Viewer(["--store", str(stores["store"]), "--host", "0.0.0.0", "--port", "0", "--token", token],
                   tmp_path / "view.log")
    try:
        assert v.url.endswith("?token=" + token)
        assert kit.http(v.base + "/api/runs")[0] == 401
        assert kit.http(v.base + "/api/runs", headers={"Authorization": f"Bearer {token}"})[0] == 200
    finally:
        v.stop()
