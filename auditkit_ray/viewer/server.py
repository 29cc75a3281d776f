"""The viewer's HTTP server (aiohttp.web): a static single page and a JSON API over the facade's
``results_browser``.

Security model: read-only (GET and HEAD; anything else is 405); bound to
127.0.0.1 unless a host is given, and then every request needs the token
(``X-Auditkit-Token`` or ``Authorization: Bearer`` header, or ``?token=``,
which sets a cookie, then the cookie); no path from a request reaches a file:
static files come from a fixed list shipped with the package, runs and sweeps
are named by fingerprint and looked up in the stores' listings; every answer
is redacted by the browser and scrubbed of remembered secret values here;
the page renders every result string with ``textContent`` (never as HTML),
and a strict Content-Security-Policy forbids inline script on the viewer's
pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import secrets
import sys
import time
from importlib import resources
from typing import Any

from aiohttp import web

from .. import api
from ..errors import ConfigError

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
#: the only files served: name -> content type
STATIC = {"index.html": "text/html", "app.js": "text/javascript", "app.css": "text/css"}
COOKIE = "auditkit_view_token"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
#: the embedded HTML report carries its own inline script and style; it runs sandboxed, without the origin
REPORT_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
              "sandbox allow-scripts")


def _static(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def _headers(csp: str = CSP) -> dict[str, str]:
    return {"Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store", "X-Frame-Options": "SAMEORIGIN"}


def _json(data: Any, status: int = 200) -> web.Response:
    body = api.scrub_secrets(json.dumps(data, ensure_ascii=False, allow_nan=False, default=str))
    return web.Response(text=body, status=status, content_type="application/json", headers=_headers())


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status)


def _float(q: Any, key: str) -> float | None:
    v = q.get(key)
    if v in (None, ""):
        return None
    try:
        return float(v)
    except ValueError:
        raise ConfigError(f"{key}={v!r}: not a number") from None


def _int(q: Any, key: str, default: int) -> int:
    v = q.get(key)
    try:
        return int(v) if v not in (None, "") else default
    except ValueError:
        raise ConfigError(f"{key}={v!r}: not a whole number") from None


def make_app(browser: Any, *, token: str | None = None, log: Any = None) -> web.Application:
    """The application over ``browser`` (the facade's ``results_browser``); ``token``: required on every request."""

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="read-only", headers={"Allow": "GET, HEAD"})
        set_cookie = False
        if token is not None:
            given = (request.headers.get("X-Auditkit-Token") or request.headers.get("Authorization", "")
                     .removeprefix("Bearer ").strip() or None)
            if given is None and "token" in request.query:
                given, set_cookie = request.query["token"], True
            if given is None:
                given = request.cookies.get(COOKIE)
            if not given or not hmac.compare_digest(given.encode(), token.encode()):
                return web.Response(status=401, text="a token is required (?token=... as printed at start)")
        t0 = time.perf_counter()
        try:
            resp = await handler(request)
        except web.HTTPException as exc:
            resp = _error(exc.status, exc.reason)
        if set_cookie:
            resp.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
        resp.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - t0) * 1000:.1f}"
        if log is not None:
            print(f"{request.method} {request.path} {resp.status} {(time.perf_counter() - t0) * 1000:.0f}ms",
                  file=log, flush=True)
        return resp

    async def call(fn: Any, *args: Any, **kw: Any) -> web.Response:
        try:
            return _json(await asyncio.to_thread(fn, *args, **kw))
        except ConfigError as exc:
            return _error(getattr(exc, "http_status", 400), api.scrub_secrets(str(exc).splitlines()[0]))

    async def static(request: web.Request) -> web.Response:
        name = request.match_info.get("name", "index.html")
        if name not in STATIC:  # a fixed list: nothing else, whatever the path says
            raise web.HTTPNotFound()
        return web.Response(body=_static(name), content_type=STATIC[name], headers=_headers())

    async def runs(request: web.Request) -> web.Response:
        q = request.query
        try:  # no limit: every match
            page = dict(offset=_int(q, "offset", 0), limit=_int(q, "limit", 0) if q.get("limit") else None)
        except ConfigError as exc:
            return _error(400, str(exc))
        return await call(browser.runs, name=q.get("name"), model=q.get("model"), dataset=q.get("dataset"),
                          sweep=q.get("sweep"), since=q.get("since"), until=q.get("until"),
                          fingerprint=q.get("fp"), **page)

    async def run(request: web.Request) -> web.Response:
        return await call(browser.run, request.match_info["fp"])

    async def samples(request: web.Request) -> web.Response:
        q = request.query
        try:
            kw = dict(offset=_int(q, "offset", 0), limit=_int(q, "limit", 50), search=q.get("q") or None,
                      status=q.get("status") or None, metric=q.get("metric") or None,
                      score_min=_float(q, "min"), score_max=_float(q, "max"))
        except ConfigError as exc:
            return _error(400, str(exc))
        return await call(browser.samples, request.match_info["fp"], **kw)

    async def diff(request: web.Request) -> web.Response:
        return await call(browser.diff, request.query.get("a", ""), request.query.get("b", ""))

    async def sweep(request: web.Request) -> web.Response:
        return await call(browser.sweep, request.match_info["fp"])

    async def sweep_report(request: web.Request) -> web.Response:
        try:
            html = await asyncio.to_thread(browser.sweep_report, request.match_info["fp"])
        except ConfigError as exc:
            return _error(getattr(exc, "http_status", 400), str(exc).splitlines()[0])
        return web.Response(text=api.scrub_secrets(html), content_type="text/html", headers=_headers(REPORT_CSP))

    async def no_icon(request: web.Request) -> web.Response:
        return web.Response(status=204, headers=_headers())  # browsers ask for one; none is shipped

    app = web.Application(middlewares=[guard])
    app.router.add_get("/", static)
    app.router.add_get("/favicon.ico", no_icon)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/api/runs", runs)
    app.router.add_get("/api/run/{fp}", run)
    app.router.add_get("/api/run/{fp}/samples", samples)
    app.router.add_get("/api/diff", diff)
    app.router.add_get("/api/sweep/{fp}", sweep)
    app.router.add_get("/api/sweep/{fp}/report.html", sweep_report)
    return app


def serve(stores: list[str], *, db: str | None = None, host: str = "127.0.0.1", port: int = 8765,
          token: str | None = None, endpoint_url: str | None = None, region: str | None = None,
          log_requests: bool = False) -> None:
    """Serve until interrupted; prints one line ``auditkit-ray view: serving URL`` once it listens."""
    browser = api.results_browser(stores, db=db, endpoint_url=endpoint_url, region=region)
    if host not in LOOPBACK and not token:
        token = secrets.token_urlsafe(24)
    if token is not None and len(token) < 16:
        raise ConfigError("--token: give at least 16 characters (or leave it out to get a random one)")
    app = make_app(browser, token=token, log=sys.stderr if log_requests else None)

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(f"--host {host} --port {port}: cannot listen ({exc.strerror or exc})") from None
        bound = runner.addresses[0][1] if runner.addresses else port
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        shown = f"[{shown}]" if ":" in shown else shown
        url = f"http://{shown}:{bound}/" + (f"?token={token}" if token else "")
        print(f"auditkit-ray view: serving {url}", flush=True)
        if token:
            print(f"auditkit-ray view: listening on {host}:{bound}; every request needs the token "
                  "(header X-Auditkit-Token, ?token= or the cookie it sets)", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how the viewer stops: no traceback
        asyncio.run(main())
