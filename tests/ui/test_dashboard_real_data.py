"""The actor page with real data, in Chromium: a 5 MB state and a 500-entry history keep the page as wide as the
viewport (big values collapsed, scrolling in their own box); after a compensated failure the page names the undone
steps, in order, and offers no Resume (the status's `remedies`: dormant.runtime.remedies)."""

from __future__ import annotations

import struct
from typing import Any

from playwright.async_api import BrowserContext, Page, expect
from pydantic import BaseModel

from dormant import StepContext, WorkflowContext, actor, setup
from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.support import serve
from tests.ui.test_dashboard import browser, watch  # noqa: F401 (the fixture)

VIEWPORT = {"width": 1280, "height": 800}
STATE_BYTES = 5_000_000
STEPS = 500

class BigState(BaseModel):
    blob: str = ""
    rows: list[dict[str, Any]] = []


class SagaState(BaseModel):
    undone: list[str] = []


big = actor("big", state=BigState)


@big.workflow
async def run_big(ctx: WorkflowContext) -> None:
    def fill(s: StepContext) -> dict[str, str]:
        s.state.blob = "x" * STATE_BYTES  # one unbroken line of 5 MB: the worst case for a page's width
        s.state.rows = [{"id": i, "note": "y" * 40} for i in range(200)]
        return {"wide": "z" * 20_000}  # a step's result of 20 KB, unbroken too

    await ctx.step("fill", fill)
    for index in range(STEPS - 1):
        await ctx.step(f"s{index}", lambda s, i=index: i)


saga = actor("saga", state=SagaState)


@saga.workflow
async def run_saga(ctx: WorkflowContext) -> None:
    def undo(s: StepContext, output: object) -> None:
        s.state.undone.append(str(output))

    await ctx.rollback_checkpoint("start")
    await ctx.step("reserve", lambda s: "reserved", rollback=undo)
    await ctx.step("charge", lambda s: "charged", rollback=undo)
    await ctx.step("ship", lambda s: (_ for _ in ()).throw(RuntimeError("carrier down")), max_retries=0)


registry = setup(big, saga)
SETTINGS = Settings(dev=True, auth_mode="none")  # type: ignore[arg-type]


async def _widths(page: Page) -> tuple[int, int]:
    found = await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    return int(found[0]), int(found[1])


def _png_width(png: bytes) -> int:
    return int(struct.unpack(">I", png[16:20])[0])  # (the IHDR chunk: width, then height)


async def test_a_five_megabyte_state_and_500_entries_keep_the_page_as_wide_as_the_viewport(
        browser: BrowserContext) -> None:  # noqa: F811
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("big", "b-1")
        await handle.status()
        await env.run_until_idle()
        assert len(await handle.history()) == STEPS
        async with serve(create_app(registry, SETTINGS, service=env.service)) as url:
            page = await browser.new_page()
            await page.set_viewport_size(VIEWPORT)
            seen = watch(page, url)
            await page.goto(f"{url}/ui#/actor/big/b-1")
            state = page.locator("#state details.large-value")
            await expect(state.locator("summary")).to_contain_text("state: 5.0 MB of JSON")
            await expect(page.locator("#timeline li")).to_have_count(STEPS)
            await expect(page.locator("#versions tr[data-version]").first).to_be_visible()
            assert await _widths(page) == (VIEWPORT["width"], VIEWPORT["width"])
            # Opened, the 5 MB value and the 20 KB result scroll inside their boxes: the page stays as wide.
            await state.locator("summary").click()
            await expect(state.locator("pre")).to_contain_text('"blob": "xxx')
            result = page.locator('#timeline li[data-location="fill"] details.value.large-value')
            await expect(result.locator("summary")).to_contain_text("result: 20.0 KB of JSON")
            await result.locator("summary").click()
            await expect(result.locator("pre")).to_contain_text('"wide": "zzz')
            assert await _widths(page) == (VIEWPORT["width"], VIEWPORT["width"])
            box = await state.locator("pre").bounding_box()
            assert box is not None and box["x"] + box["width"] <= VIEWPORT["width"]
            assert await page.locator("#versions button.fork").first.is_visible()
            png = await page.screenshot(full_page=True)
            assert _png_width(png) == VIEWPORT["width"]
            assert seen["errors"] == [], seen["errors"]


async def test_after_a_compensated_failure_the_page_names_the_undone_steps_and_offers_no_resume(
        browser: BrowserContext) -> None:  # noqa: F811
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("saga", "s-1")
        await handle.status()
        await env.run_until_idle()
        assert (await handle.status()).workflow.value == "failed"
        async with serve(create_app(registry, SETTINGS, service=env.service)) as url:
            page = await browser.new_page()
            await page.set_viewport_size(VIEWPORT)
            await page.goto(f"{url}/ui#/actor/saga/s-1")
            await expect(page.locator("#compensation")).to_contain_text("compensated: 2 step(s) undone, in this order")
            await expect(page.locator("#undone li")).to_have_text(["charge", "reserve"])
            await expect(page.locator("#waits")).to_contain_text("resume is refused")
            await expect(page.locator("#waits")).to_contain_text("Reset it to a kept version")
            await expect(page.locator("#resume")).to_be_hidden()
            for visible in ("#terminate", "#delete", "#versions button.fork", "#versions button.reset"):
                await expect(page.locator(visible).first).to_be_visible()
            await expect(page.locator('#timeline li[data-location="charge"]')).to_contain_text(
                "undone by its rollback handler")
            await expect(page.locator('#timeline li[data-location="charge"]')).to_have_class("completed undone")
