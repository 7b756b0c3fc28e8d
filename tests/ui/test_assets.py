"""The dashboard's and Swagger UI's files are in the package and served from it, with the headers that keep the
page to itself; the committed Swagger UI is the version the Makefile pins."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from dormant.http.app import create_app
from dormant.http.ui import CSP, STATIC, SWAGGER_FILES, UI_FILES
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.apps import registry

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_swagger_ui_is_the_pinned_version() -> None:
    pinned = re.search(r"^SWAGGER_UI_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert pinned is not None
    assert (STATIC / "swagger" / "VERSION").read_text().strip() == pinned.group(1)
    assert f'"{pinned.group(1)}"' in (STATIC / "swagger" / "swagger-ui-bundle.js").read_text()
    assert "Apache License" in (STATIC / "swagger" / "LICENSE").read_text()


async def test_every_asset_is_served_and_nothing_else() -> None:
    env = TestEnv(registry)
    app = create_app(registry, Settings(dev=False), service=env.service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://api") as http:
        page = await http.get("/ui")
        assert page.status_code == 200 and page.headers["content-security-policy"] == CSP
        assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
        for name in sorted(UI_FILES):
            response = await http.get(f"/ui/assets/{name}")
            assert response.status_code == 200 and response.content == (STATIC / "ui" / name).read_bytes()
            assert response.headers["x-content-type-options"] == "nosniff"
            assert f"ui/assets/{name}" in page.text
        for name in sorted(SWAGGER_FILES):
            assert (await http.get(f"/docs/assets/{name}")).status_code == 200
        docs = (await http.get("/docs")).text
        assert "docs/assets/swagger-ui-bundle.js" in docs and "http" not in docs.split("<script>")[-1].lower()
        for probe in ("../app.py", "%2e%2e%2fapp.py", "index.html", "VERSION", "app.js.map", ""):
            assert (await http.get(f"/ui/assets/{probe}")).status_code == 404, probe
            assert (await http.get(f"/docs/assets/{probe}")).status_code == 404, probe
        assert (await http.get("/ui/config.json")).json() == {"dev": False, "title": "Dormant actors", "pushed": False}
        assert (await http.get("/redoc")).status_code == 404  # FastAPI's CDN-loading pages are off


def test_the_package_data_patterns_cover_every_asset() -> None:
    """setuptools ships what pyproject's package-data globs match (relative to lib/dormant): all of static/."""
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["dormant"]
    package = ROOT / "lib" / "dormant"
    shipped = {path for pattern in patterns for path in package.glob(pattern) if path.is_file()}
    assets = {path for path in (package / "http" / "static").rglob("*") if path.is_file()}
    assert assets and assets <= shipped, sorted(str(p) for p in assets - shipped)
