"""The dashboard's Pause, Unpause, kept versions, fork and reset buttons in a real browser (Debian's chromium via
Playwright) over a running dev stack with the walkthrough's shop (docs/operations)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, expect

from dormant.http.client import HttpClient
from tests.servers import MotoServer
from tests.ui.test_dashboard import _apps, _until, browser, moto, stack, watch

__all__ = ["browser", "moto"]  # the fixtures, imported to be used here


async def test_pause_unpause_fork_and_reset_from_the_actor_page(
        browser: BrowserContext, moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # (the shop's payment provider is up: no ./payments.down)
    shop, _ = _apps()
    suffix = uuid.uuid4().hex[:8]
    names = {"table": f"pr-{suffix}", "queue_name": f"pr-{suffix}.fifo", "timer_queue_name": f"pr-timers-{suffix}",
             "dlq_name": f"pr-dlq-{suffix}", "fifo_dlq_name": f"pr-dlq-{suffix}.fifo"}
    async with stack(shop, moto.endpoint, names) as running, HttpClient(running.api_url) as http:
        url = running.api_url
        await http.get_or_create("order", "o-1").call("get")
        await _until(http, "o-1", "sleeping")  # reserved and charged: it waits to be shipped
        waiting = (await http.get_or_create("order", "o-1").status()).version
        page = await browser.new_page()
        seen = watch(page, url)
        await page.goto(f"{url}/ui#/actor/order/o-1")
        await expect(page.locator("h1")).to_have_text("order o-1")
        await expect(page.locator("#unpause")).to_be_hidden()

        # pause: a message sent from the page waits in the inbox, unprocessed
        page.once("dialog", lambda dialog: dialog.accept("checking the carrier"))
        await page.click("#pause")
        await expect(page.locator("#flash")).to_contain_text("pause: paused — sleeping -> paused by dev:dev "
                                                             "(checking the carrier)")
        await expect(page.locator("#actor-status .status")).to_have_text("paused")
        await expect(page.locator("#waits")).to_contain_text("paused by dev:dev (checking the carrier)")
        await expect(page.locator("#pause")).to_be_hidden()
        ship = page.locator('form.send[data-queue="ship"]')
        await ship.locator("textarea").fill('{"carrier": "ups"}')
        await ship.locator("button").click()
        await expect(page.locator("#flash")).to_contain_text("the actor is paused")
        await expect(page.locator("#inbox tbody tr")).to_have_count(1)
        counts_page = await browser.new_page()
        await counts_page.goto(f"{url}/ui")
        await expect(counts_page.locator('#types tr[data-type="order"] td[data-status="paused"]')).to_have_text("1")
        await counts_page.close()

        # unpause: the message runs, once
        await page.click("#unpause")
        await expect(page.locator("#flash")).to_contain_text("unpause: unpaused")
        await expect(page.locator("#actor-status .status")).to_have_text("completed")
        await expect(page.locator("#no-inbox")).to_have_text("no messages waiting")
        await expect(page.locator("#events li")).to_have_count(1)

        # the kept versions; fork the one that waited to be shipped
        row = page.locator(f'#versions tr[data-version="{waiting}"]')
        await expect(row).to_contain_text("sleeping")
        await row.locator("button.show-version").click()
        await expect(page.locator("#version-state")).to_contain_text('"charge": "ch_o-1"')
        await expect(page.locator("#version-state")).to_contain_text('"carrier": null')
        page.once("dialog", lambda dialog: dialog.accept("o-1,again"))
        await row.locator("button.fork").click()
        await expect(page.locator("#flash")).to_contain_text(f"fork: forked — forked from order['o-1'] at version "
                                                             f"{waiting}")
        copy = http.get_or_create("order", ["o-1", "again"])
        assert (await copy.state())["charge"] == "ch_o-1"
        await page.goto(f"{url}/ui#/actor/order/o-1,again")
        await expect(page.locator("#rewritten")).to_contain_text(f"forked from order['o-1'] at version {waiting}")
        await expect(page.locator("#waits")).to_have_text("waits for a message on ship")
        page.once("dialog", lambda dialog: dialog.accept("not,,a key"))
        await page.locator("#versions tbody tr").first.locator("button.fork").click()
        await expect(page.locator("#flash")).to_contain_text("fork refused: bad key")

        # reset o-1 to that version: shipped again with another carrier
        await page.goto(f"{url}/ui#/actor/order/o-1")
        await expect(page.locator("h1")).to_have_text("order o-1")
        page.once("dialog", lambda dialog: dialog.accept("wrong carrier"))
        await page.locator(f'#versions tr[data-version="{waiting}"] button.reset').click()
        await expect(page.locator("#flash")).to_contain_text("reset: reset — version")
        await expect(page.locator("#flash")).to_contain_text("1 message(s) received after")
        await expect(page.locator("#actor-status .status")).to_have_text("sleeping")
        await expect(page.locator("#rewritten")).to_contain_text("by dev:dev (wrong carrier)")
        send = page.locator('form.send[data-queue="ship"]')
        await send.locator("textarea").fill('{"carrier": "dhl"}')
        await send.locator("button").click()
        await expect(page.locator("#actor-status .status")).to_have_text("completed")
        await expect(page.locator("#state")).to_contain_text('"carrier": "dhl"')
        assert seen["errors"] == [], seen["errors"]
