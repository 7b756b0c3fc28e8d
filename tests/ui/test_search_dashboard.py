"""Finding actors by their search attributes on the dashboard, in a real browser (Debian's chromium, Playwright): the
type's listing takes conditions as rows, shows the matches with their attributes and counts per status, keeps the
conditions across the status filter, says why a condition cannot be read (without repeating it), and an actor's page
shows its attributes."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, async_playwright, expect

from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from examples.order_search import registry
from tests.api.support import serve

CHROMIUM = os.environ.get("DORMANT_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    if not Path(CHROMIUM).exists():
        if "DORMANT_CHROMIUM" in os.environ:
            pytest.fail(f"no chromium at {CHROMIUM} (make chromium installs Debian's package)")
        pytest.skip(f"no chromium at {CHROMIUM} (make chromium installs it)")
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS)
        context.set_default_timeout(15_000)
        expect.set_options(timeout=15_000)
        yield context
        await context.close()


async def test_the_listing_finds_actors_by_their_search_attributes(browser: BrowserContext) -> None:
    async with TestEnv(registry) as env:
        for key, customer, amount in [("o-1", "42", 12_500), ("o-2", "42", 4_000), ("o-3", "7", 30_000),
                                      ("o-4", "42", 20_000)]:
            await env.client.get_or_create("shop-order", key).send("place", {"customer": customer, "amount": amount})
        await env.run_until_idle()
        await env.client.get_or_create("shop-order", "o-4").send("ship", {"carrier": "ups"})
        await env.run_until_idle()
        async with serve(create_app(registry, Settings(dev=True, auth_mode="none"),  # type: ignore[arg-type]
                                    service=env.service)) as url:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("console", lambda message: errors.append(message.text) if message.type == "error"
                    and not message.text.startswith("Failed to load resource") else None)  # (the 400 below)
            await page.goto(f"{url}/ui")
            await expect(page.locator('#types tr[data-type="shop-order"] .search-names')).to_have_text(
                "amount, customer, express, placed_at, stage")
            await page.goto(f"{url}/ui#/type/shop-order")
            await expect(page.locator("#actors tbody tr")).to_have_count(4)
            first = page.locator("#where-rows .where-row").first
            await first.locator(".where-attribute").select_option("customer")
            await first.locator(".where-value").fill("42")
            await page.click("#where-add")
            second = page.locator("#where-rows .where-row").nth(1)
            await second.locator(".where-attribute").select_option("amount")
            await expect(second.locator(".where-op option")).to_have_count(5)  # no "starts with" for an int
            await second.locator(".where-op").select_option(">")
            await second.locator(".where-value").fill("10000")
            await page.click("#where-search")
            rows = page.locator("#actors tbody tr")
            await expect(rows).to_have_count(2)
            await expect(rows.nth(0)).to_have_attribute("data-key", "o-1")  # in amount order
            await expect(rows.nth(0).locator('td[data-attribute="amount"]')).to_have_text("12500")
            await expect(rows.nth(1).locator('td[data-attribute="stage"]')).to_have_text("shipped")
            await expect(page.locator("#where-counts")).to_have_text("matches: 1 sleeping · 1 completed")
            assert "where=customer%3D42" in page.url and "where=amount%3E10000" in page.url
            await page.select_option("#status-filter", "completed")  # the conditions stay
            await expect(rows).to_have_count(1)
            await expect(rows.first).to_have_attribute("data-key", "o-4")
            await expect(page.locator("#where-rows .where-row")).to_have_count(2)
            await expect(page.locator("#where-rows .where-value").nth(1)).to_have_value("10000")
            await page.click("#where-clear")
            await expect(rows).to_have_count(1)  # completed ones, no conditions: the plain listing
            await expect(page.locator("#where-rows .where-row")).to_have_count(1)

            await page.goto(f"{url}/ui#/type/shop-order?where=amount%3E4111-1111")
            await expect(page.locator("#where-error")).to_contain_text('where condition 1: attribute "amount"')
            await expect(page.locator("#where-error")).not_to_contain_text("4111")
            await expect(page.locator("#actors")).to_have_count(0)

            await page.goto(f"{url}/ui#/actor/shop-order/o-3")
            attributes = page.locator("#search-attributes")
            await expect(attributes.locator('[data-name="customer"] code')).to_have_text("7")
            await expect(attributes.locator('[data-name="express"] code')).to_have_text("true")
            assert errors == [], errors
