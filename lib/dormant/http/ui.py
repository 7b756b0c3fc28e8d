"""The dashboard at `/ui` and the API docs at `/docs`, both served from files shipped in the package (no CDN:
they work offline and behind a firewall).

- `/ui`: a single page (static/ui: HTML, JS, CSS) over the API's own routes: the actors that need an operator
  (failed first) and every type's counts per status, actors by status and what they wait for, actors found by their
  search attributes (conditions as rows, the matches' counts per status), per actor its search attributes, its
  state, its timeline (lanes.js: entries on a time axis, a lane per branch; docs/observability.md), its history
  (timestamps, expandable values), its waiting messages, forms to send a message or call an
  action (from the OpenAPI document's schemas), its live events and the divergence diff, and buttons to resume,
  terminate, delete and, under `dormant dev`, fire its next timer. The page holds no data; outside `dormant dev`
  it asks for the operator token and sends it in X-Dormant-Operator-Token (Authorization stays free for the
  caller's SigV4 signature or JWT, which a proxy in front adds in iam or jwt mode).
- `/docs`: Swagger UI (static/swagger: npm's swagger-ui-dist, committed; `make swagger-ui` refreshes it).
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from dormant.http.errors import ApiError

STATIC = resources.files("dormant.http") / "static"
MEDIA = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".html": "text/html; charset=utf-8", ".txt": "text/plain; charset=utf-8"}
UI_FILES = frozenset({"app.js", "lanes.js", "app.css", "realtime.js"})  # realtime.js: docs/realtime.md, for apps too
SWAGGER_FILES = frozenset({"swagger-ui-bundle.js", "swagger-ui.css", "swagger-ui-bundle.js.LICENSE.txt"})
# The dashboard runs only its own script and talks only to this API.
# (connect-src 'self' covers the same host's ws: and wss:, where dormant dev serves its WebSocket API.)
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def _asset(folder: str, name: str, allowed: frozenset[str]) -> Response:
    if name not in allowed:  # a fixed list: no path ever reaches the file system
        raise ApiError(404, "not_found", f"no such file: {folder}/{name}")
    body = (STATIC / folder / name).read_bytes()
    suffix = name[name.rfind("."):]
    return Response(body, media_type=MEDIA[suffix], headers={"Cache-Control": "public, max-age=300",
                                                             "X-Content-Type-Options": "nosniff"})


def ui_router(*, dev: bool, title: str, openapi_url: str = "/openapi.json", pushed: bool = False) -> APIRouter:
    """`pushed`: the page may subscribe to events over this server's WebSocket API (dev with a realtime endpoint,
    as `dormant dev` serves it); otherwise it reads them with short requests."""
    router = APIRouter(include_in_schema=False)

    @router.get("/ui")
    async def dashboard() -> HTMLResponse:
        page = (STATIC / "ui" / "index.html").read_text(encoding="utf-8")
        return HTMLResponse(page, headers={"Content-Security-Policy": CSP, "Cache-Control": "no-cache",
                                           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"})

    @router.get("/ui/")
    async def dashboard_slash() -> RedirectResponse:
        return RedirectResponse("../ui", status_code=308)

    @router.get("/ui/config.json")
    async def config() -> JSONResponse:
        """What the page needs to know: whether the data routes need a token, whether events are pushed."""
        return JSONResponse({"dev": dev, "title": title, "pushed": pushed})

    @router.get("/ui/assets/{name}")
    async def ui_asset(name: str) -> Response:
        return _asset("ui", name, UI_FILES)

    @router.get("/docs/assets/{name}")
    async def swagger_asset(name: str) -> Response:
        return _asset("swagger", name, SWAGGER_FILES)

    @router.get("/docs")
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=openapi_url, title=f"{title} - API docs",
                                   swagger_js_url="docs/assets/swagger-ui-bundle.js",
                                   swagger_css_url="docs/assets/swagger-ui.css", swagger_favicon_url="data:,",
                                   swagger_ui_parameters={"validatorUrl": None})  # no call to an outside validator

    return router
