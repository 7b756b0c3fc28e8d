"""The dashboard's open callbacks, in a real browser (Debian's chromium, Playwright): under `dormant dev` a waiting
callback shows its deadlines and its token, and its form posts the outside system's completion, which resumes the
workflow; deployed (no dev mode) the page shows the deadlines and never a token."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from playwright.async_api import BrowserContext, expect
from pydantic import BaseModel

from dormant import Approval, StepContext, WorkflowContext, actor, callback, setup
from dormant.http.app import create_app
from dormant.http.client import HttpClient
from dormant.settings import Settings
from dormant.testing import TestEnv
from examples.payment_webhook import registry
from tests.api.support import serve
from tests.servers import MotoServer
from tests.ui.test_dashboard import browser, moto, stack, watch

__all__ = ["browser", "moto"]  # the fixtures this module shares with test_dashboard


async def _awaiting_payment(http: HttpClient, key: str) -> None:
    handle = http.get_or_create("payment-checkout", key)
    await handle.send("order", {"amount_cents": 4200})
    deadline = time.monotonic() + 20
    while (await handle.state())["status"] != "awaiting_payment":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)


async def test_a_waiting_callback_is_completed_from_the_page_under_dormant_dev(
        browser: BrowserContext, moto: MotoServer, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    names = {"table": f"cb-{suffix}", "queue_name": f"cb-{suffix}.fifo", "timer_queue_name": f"cb-t-{suffix}",
             "dlq_name": f"cb-dlq-{suffix}", "fifo_dlq_name": f"cb-dlq-{suffix}.fifo"}
    async with stack(registry, moto.endpoint, names) as running, HttpClient(running.api_url) as http:
        url = running.api_url
        await _awaiting_payment(http, "order-1")
        page = await browser.new_page()
        seen = watch(page, url)
        await page.goto(f"{url}/ui#/actor/payment-checkout/order-1")
        await expect(page.locator("#waits")).to_contain_text("callback payment")
        row = page.locator('#callbacks tr[data-callback="payment"]')
        await expect(row).to_contain_text("in 23h")  # its timeout, a day out
        token = await row.locator(".callback-token").inner_text()
        assert token.startswith("dcb_") and len(token) == 47
        await row.locator(".callback-result").fill('{"status": "paid", "amount_cents": -1, "reference": "r"}')
        await row.locator(".callback-complete").click()
        await expect(page.locator("#flash")).to_contain_text("complete refused")
        await expect(page.locator("#flash")).to_contain_text("amount_cents")
        await row.locator(".callback-result").fill('{"status": "paid", "amount_cents": 4200, "reference": "pay_9"}')
        await row.locator(".callback-complete").click()
        await expect(page.locator("#flash")).to_contain_text("callback payment: complete → accepted")
        await expect(page.locator("#actor-status .status")).to_have_text("completed")
        await expect(page.locator("#state")).to_contain_text('"reference": "pay_9"')
        await expect(page.locator("#no-callbacks")).to_have_text("no open callbacks")
        await expect(page.locator('#timeline li[data-location="payment"]')).to_contain_text("callback payment: →")
        assert seen["errors"] == [], seen["errors"]


async def test_deployed_the_page_shows_a_callbacks_deadlines_never_its_token(browser: BrowserContext) -> None:
    settings = Settings(dev=False, inspector_token="s3cret", auth_mode="none")  # type: ignore[arg-type]
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("payment-checkout", ["order-2"])
        await handle.send("order", {"amount_cents": 100})
        await env.run_until_idle()
        token = next(e.callback.token for e in await handle.history() if e.callback is not None)
        async with serve(create_app(registry, settings, service=env.service)) as url:
            page = await browser.new_page()
            await page.goto(f"{url}/ui")
            await page.fill("#token", "s3cret")
            await page.click("#token-form button")
            await page.goto(f"{url}/ui#/actor/payment-checkout/order-2")
            row = page.locator('#callbacks tr[data-callback="payment"]')
            await expect(row).to_contain_text("payment")
            await expect(page.locator("#timeline")).to_contain_text("callback payment: open")
            assert await page.locator(".callback-token").count() == 0
            assert token not in await page.content()


class _Decision(BaseModel):
    link: str = ""
    outcome: str = ""


_refund = actor("refund", state=_Decision, callbacks={"sign-off": callback(Approval, description=(
    'Refund 42 € to <b>order-7</b>? <img src=x onerror="document.title=1">'))})


@_refund.workflow
async def _refund_run(ctx: WorkflowContext) -> None:
    approval = await ctx.callback("sign-off", timeout=3600)

    def email(s: StepContext) -> None:
        s.state.link = approval.approval_url

    await ctx.step("email", email)
    decided = await approval.result()

    def record(s: StepContext) -> None:
        s.state.outcome = "approved" if decided.approved else "rejected"

    await ctx.step("record", record)


async def test_an_approval_link_s_page_completes_nothing_and_its_button_does(browser: BrowserContext) -> None:
    refunds = setup(_refund)
    async with TestEnv(refunds) as env:
        handle = env.client.get_or_create("refund", ["r-1"])
        await handle.status()
        await env.run_until_idle()
        token = (await handle.state()).link.rsplit("/", 2)[1]
        async with serve(create_app(refunds, Settings(auth_mode="iam"), service=env.service)) as url:
            page = await browser.new_page()
            seen = watch(page, url)
            for _ in range(2):  # a scanner's prefetch, then the person: opening the page decides nothing
                await page.goto(f"{url}/callbacks/{token}/approve")
                await expect(page.locator("#description")).to_have_text(
                    'Refund 42 € to <b>order-7</b>? <img src=x onerror="document.title=1">')  # shown as text
            await env.run_until_idle()
            assert (await env.client.callback_status(token)).status == "open"
            assert (await handle.status()).workflow == "sleeping" and await page.title() == "Approval"
            await page.locator("#approve").click()
            await expect(page.locator("#outcome")).to_have_text("Approved. Thank you.")
            await env.run_until_idle()
            assert (await handle.state()).outcome == "approved"
            assert (await handle.status()).workflow == "completed"
            await page.goto(f"{url}/callbacks/{token}/approve")
            await expect(page.locator("#outcome")).to_have_text("This request has been answered already.")
            assert await page.locator("#approve").count() == 0
            assert seen == {"outside": [], "errors": []}
