"""The dashboard (/ui) and the API docs (/docs) in a real browser: Debian's chromium, driven by Playwright, over a
running dev stack (moto server, worker, API) with the walkthrough's shop (docs/operations)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page, async_playwright, expect

from dormant.actor import Registry
from dormant.dev.stack import DevStack, free_port, run_dev_stack
from dormant.http.app import create_app
from dormant.http.client import HttpClient
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.support import serve
from tests.servers import MotoServer

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("DORMANT_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
TIMEOUT = 20_000  # ms: the worker polls SQS once a second, retries back off


def _apps() -> tuple[Registry, Registry]:
    sys.path.insert(0, str(ROOT / "docs" / "operations"))
    try:
        import shop
        import shop_v2
    finally:
        sys.path.remove(str(ROOT / "docs" / "operations"))
    return shop.registry, shop_v2.registry


@pytest.fixture
def moto() -> Iterator[MotoServer]:
    server = MotoServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    if not Path(CHROMIUM).exists():
        if "DORMANT_CHROMIUM" in os.environ:  # `make test` installs it: missing there is a failure
            pytest.fail(f"no chromium at {CHROMIUM} (make chromium installs Debian's package)")
        pytest.skip(f"no chromium at {CHROMIUM} (make chromium installs it)")
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS)
        context.set_default_timeout(TIMEOUT)
        expect.set_options(timeout=TIMEOUT)
        yield context
        await context.close()


@asynccontextmanager
async def stack(registry: Registry, endpoint: str, names: dict[str, str]) -> AsyncIterator[DevStack]:
    settings = Settings(**names)  # type: ignore[arg-type]
    async with run_dev_stack(registry, port=free_port(), endpoint_url=endpoint, settings=settings) as running:
        yield running


def watch(page: Page, origin: str) -> dict[str, list[str]]:
    """Requests that left the stack, and console errors (a CSP violation shows as one)."""
    seen: dict[str, list[str]] = {"outside": [], "errors": []}
    page.on("request", lambda request: None if request.url.startswith((origin, "data:"))
            else seen["outside"].append(request.url))
    page.on("console", lambda message: seen["errors"].append(message.text) if message.type == "error"
            and not message.text.startswith("Failed to load resource") else None)  # (a refused resume is a 409)
    page.on("pageerror", lambda error: seen["errors"].append(str(error)))
    return seen


async def test_the_dashboard_over_a_running_stack(browser: BrowserContext, moto: MotoServer, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the shop's payment provider is down while ./payments.down exists
    v1, v2 = _apps()
    suffix = uuid.uuid4().hex[:8]
    names = {"table": f"ui-{suffix}", "queue_name": f"ui-{suffix}.fifo", "timer_queue_name": f"ui-timers-{suffix}",
             "dlq_name": f"ui-dlq-{suffix}", "fifo_dlq_name": f"ui-dlq-{suffix}.fifo"}
    async with stack(v1, moto.endpoint, names) as first, HttpClient(first.api_url) as http:
        await http.get_or_create("order", "o-7").call("get")  # recorded by this release, waiting to be shipped
        await _until(http, "o-7", "sleeping")
    async with stack(v2, moto.endpoint, names) as running, HttpClient(running.api_url) as http:
        url = running.api_url
        await http.get_or_create("order", "o-1").send("ship", {"carrier": "ups"})
        for key in ("o-3", "o-4"):
            await http.get_or_create("order", key).call("get")
        await http.get_or_create("order", "o-7").send("ship", {"carrier": "ups"})  # the new release diverges
        await _until(http, "o-1", "completed")
        for key in ("o-3", "o-4"):
            await _until(http, key, "sleeping")
        await _until(http, "o-7", "diverged")
        (tmp_path / "payments.down").write_text("down")
        await http.get_or_create("order", "o-2").send("ship", {"carrier": "dhl"})
        await _until(http, "o-2", "failed")

        page = await browser.new_page()
        seen = watch(page, url)
        await page.goto(f"{url}/ui")
        await page.locator("#types a", has_text="order").click()
        rows = page.locator("#actors tbody tr")
        await expect(rows).to_have_count(5)
        await expect(page.locator('tr[data-key="o-1"] .status')).to_have_text("completed")
        await expect(page.locator('tr[data-key="o-2"] .status')).to_have_text("failed")
        await expect(page.locator('tr[data-key="o-7"] .status')).to_have_text("diverged")
        await expect(page.locator('tr[data-key="o-3"] .waits')).to_have_text("waits for a message on ship")
        await page.select_option("#status-filter", "failed")
        await expect(rows).to_have_count(1)
        await expect(rows.first).to_have_attribute("data-key", "o-2")

        # a failed actor: its error and timeline, then fixed and resumed from the dashboard
        await rows.first.locator("a").click()
        await expect(page.locator("h1")).to_have_text("order o-2")
        await expect(page.locator("#actor-status")).to_contain_text("payment provider is unavailable")
        await expect(page.locator("#timeline li", has_text="step charge")).to_contain_text("ConnectionError")
        await expect(page.locator("#timeline li", has_text="step reserve-stock")).to_contain_text('"book"')
        (tmp_path / "payments.down").unlink()
        await page.click("#resume")
        await expect(page.locator("#flash")).to_contain_text("resume: retrying")
        await expect(page.locator("#actor-status .status")).to_have_text("completed")
        await expect(page.locator("#state")).to_contain_text('"charge": "ch_o-2"')
        await expect(page.locator("#events li")).to_contain_text("shipped")

        # a diverged actor: the diff, and a resume the deployed code refuses
        await page.goto(f"{url}/ui#/actor/order/o-7")
        await expect(page.locator("h1")).to_have_text("order o-7")  # the view of o-7 is up
        await expect(page.locator("#divergence")).to_contain_text("reserve-stock")
        await page.click("#resume")
        await expect(page.locator("#flash")).to_contain_text("resume refused")
        await expect(page.locator("#flash")).to_contain_text("still diverges")

        # live events while the page is open
        await page.goto(f"{url}/ui#/actor/order/o-3")
        await expect(page.locator("h1")).to_have_text("order o-3")  # the view of o-3 is up
        await expect(page.locator("#waits")).to_have_text("waits for a message on ship")
        await http.get_or_create("order", "o-3").send("ship", {"carrier": "fedex"})
        await expect(page.locator("#events li")).to_contain_text('shipped {"carrier":"fedex"}')
        await expect(page.locator("#actor-status .status")).to_have_text("completed")

        # terminate, with a reason
        await page.goto(f"{url}/ui#/actor/order/o-4")
        await expect(page.locator("h1")).to_have_text("order o-4")  # the view of o-4 is up
        page.once("dialog", lambda dialog: dialog.accept("customer left"))
        await page.click("#terminate")
        await expect(page.locator("#flash")).to_contain_text("terminate: terminated")
        await expect(page.locator("#actor-status .status")).to_have_text("terminated")
        await expect(page.locator("#error")).to_contain_text("customer left")
        assert (await http.get_or_create("order", "o-4").status()).workflow.value == "terminated"

        # the API docs, offline
        await page.goto(f"{url}/docs")
        await expect(page.locator(".swagger-ui .info .title")).to_contain_text("Dormant actors")
        resume_route = page.locator(".opblock-summary-path", has_text="/actors/{actor}/{key}/resume")
        await expect(resume_route.first).to_be_visible()
        assert seen["outside"] == [], seen["outside"]  # no CDN, no validator: nothing left the stack
        assert seen["errors"] == [], seen["errors"]


async def test_the_dashboard_asks_for_the_inspector_token(browser: BrowserContext) -> None:
    registry, _ = _apps()
    settings = Settings(dev=False, inspector_token="s3cret", auth_mode="none")  # type: ignore[arg-type]
    async with TestEnv(registry) as env:
        await env.client.get_or_create("order", "o-1").call("get")
        await env.run_until_idle()
        async with serve(create_app(registry, settings, service=env.service)) as url:
            page = await browser.new_page()
            await page.goto(f"{url}/ui#/type/order")
            await expect(page.locator("#view-error")).to_contain_text("bearer token")
            await expect(page.locator("#token-form")).to_be_visible()
            await page.fill("#token", "wrong")
            await page.click("#token-form button")
            await expect(page.locator("#view-error")).to_contain_text("wrong bearer token")
            await page.fill("#token", "s3cret")
            await page.click("#token-form button")
            await expect(page.locator('tr[data-key="o-1"] .status')).to_have_text("sleeping")


async def _until(http: HttpClient, key: str, status: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = await http.get_or_create("order", key).status()
        if found.workflow.value == status:
            return found
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.2)
