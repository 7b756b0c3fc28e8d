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


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:  # (one server for the module: each stack has tables and queues of its own)
    server = MotoServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    if not Path(CHROMIUM).exists():
        if "DORMANT_CHROMIUM" in os.environ:  # `make check` installs it: missing there is a failure
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
    # The new release: the same table, queues of its own. The first stack's last receive (a 1 s long poll on an
    # external endpoint) may still be under way at the server when it stops; on the same queues it would take a
    # message sent meanwhile, which SQS hands out again only after the visibility timeout (30 s: longer than
    # `_until` waits). o-7 waits for a message, no timer: nothing of it is left on the first stack's queues.
    queues = {"queue_name": f"ui2-{suffix}.fifo", "timer_queue_name": f"ui2-timers-{suffix}",
              "dlq_name": f"ui2-dlq-{suffix}", "fifo_dlq_name": f"ui2-dlq-{suffix}.fifo"}
    async with stack(v2, moto.endpoint, {**names, **queues}) as running, HttpClient(running.api_url) as http:
        url = running.api_url
        await http.get_or_create("order", "o-1").send("ship", {"carrier": "ups"})
        for key in ("o-3", "o-4"):
            await http.get_or_create("order", key).call("get")
        await http.get_or_create("order", ["sales,emea"]).call("get")  # a one-part key with a comma
        await http.get_or_create("order", "o-7").send("ship", {"carrier": "ups"})  # the new release diverges
        await _until(http, "o-1", "completed")
        for key in ("o-3", "o-4", ["sales,emea"]):
            await _until(http, key, "sleeping")
        await _until(http, "o-7", "diverged")
        (tmp_path / "payments.down").write_text("down")
        await http.get_or_create("order", "o-2").send("ship", {"carrier": "dhl"})
        await _until(http, "o-2", "failed")

        page = await browser.new_page()
        seen = watch(page, url)
        await page.goto(f"{url}/ui")
        # the home page: what needs an operator first (failed, then diverged), with why; counts per status
        attention = page.locator("#attention tbody tr")
        await expect(attention).to_have_count(2)
        await expect(attention.nth(0)).to_have_attribute("data-key", "o-2")
        await expect(attention.nth(0).locator(".status")).to_have_text("failed")
        await expect(attention.nth(0).locator(".detail-cell")).to_contain_text("payment provider is unavailable")
        await expect(attention.nth(1)).to_have_attribute("data-key", "o-7")
        await expect(attention.nth(1).locator(".status")).to_have_text("diverged")
        counts = page.locator('#types tr[data-type="order"]')
        for status, count in (("completed", "1"), ("failed", "1"), ("diverged", "1"), ("sleeping", "3"),
                              ("terminated", "0")):
            await expect(counts.locator(f'td[data-status="{status}"]')).to_have_text(count)
        await page.locator("#types a.type-link", has_text="order").click()
        rows = page.locator("#actors tbody tr")
        await expect(rows).to_have_count(6)
        # shown as the CLI shows it, a form every command takes back (not "sales, emea", a two-part look)
        await expect(page.locator('tr[data-key="sales,emea"] a')).to_have_text("sales~2Cemea")
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
        # each entry has its times, and its values expand
        reserve = page.locator('#timeline li[data-location="reserve-stock"]')
        await expect(reserve.locator(".times")).to_contain_text("ran ")
        await expect(reserve.locator("details.value pre")).to_be_hidden()
        await reserve.locator("details.value summary").click()
        await expect(reserve.locator("details.value pre")).to_have_text('"book"')
        # the ship message it got before failing waits in its inbox
        await expect(page.locator("#inbox tbody tr")).to_have_count(1)
        await expect(page.locator("#inbox tbody tr")).to_contain_text('{"carrier":"dhl"}')
        (tmp_path / "payments.down").unlink()
        await page.click("#resume")
        await expect(page.locator("#flash")).to_contain_text("resume: retrying")
        await expect(page.locator("#actor-status .status")).to_have_text("completed")
        await expect(page.locator("#no-inbox")).to_have_text("no messages waiting")
        await expect(page.locator('#timeline li[data-location="wait-ship"]')).to_contain_text("received ship")
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
        # sent from the page: the form starts from the queue's schema; the API's checks answer a bad body
        ship = page.locator('form.send[data-queue="ship"]')
        await expect(ship.locator("textarea")).to_have_value('{\n "carrier": ""\n}')
        await ship.locator("textarea").fill("{oops")
        await ship.locator("button").click()
        await expect(page.locator("#flash")).to_contain_text("not valid JSON")
        await ship.locator("textarea").fill('{"carrier": 5}')
        await ship.locator("button").click()
        await expect(page.locator("#flash")).to_contain_text("send ship refused")
        await expect(page.locator("#flash")).to_contain_text("carrier")
        await ship.locator("textarea").fill('{"carrier": "fedex"}')
        await ship.locator("button").click()
        await expect(page.locator("#flash")).to_contain_text("send ship: queued")
        await expect(page.locator("#events li")).to_contain_text('shipped {"carrier":"fedex"}')
        await expect(page.locator("#actor-status .status")).to_have_text("completed")

        # terminate, with a reason
        await page.goto(f"{url}/ui#/actor/order/o-4")
        await expect(page.locator("h1")).to_have_text("order o-4")  # the view of o-4 is up
        await page.locator('form.call[data-action="get"] button').click()  # an action, called from the page
        await expect(page.locator("#flash")).to_contain_text('call get → {"item":"book"')
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


async def test_a_day_long_timeout_fired_from_the_page_and_the_page_loads_under_a_virtual_time_budget(
        browser: BrowserContext, moto: MotoServer, tmp_path: Path) -> None:
    from tests.ui.trip_app import DAY, registry

    suffix = uuid.uuid4().hex[:8]
    names = {"table": f"trip-{suffix}", "queue_name": f"trip-{suffix}.fifo", "timer_queue_name": f"trip-t-{suffix}",
             "dlq_name": f"trip-dlq-{suffix}", "fifo_dlq_name": f"trip-dlq-{suffix}.fifo"}
    async with stack(registry, moto.endpoint, names) as running, HttpClient(running.api_url) as http:
        url = running.api_url
        page = await browser.new_page()
        seen = watch(page, url)
        await page.goto(f"{url}/ui#/actor/trip/ann")
        # the actor does not exist yet: the page says so; a booking sent from the form creates it
        await expect(page.locator("#view-error")).to_contain_text("does not exist")
        await http.get_or_create("trip", "ann").state()  # (created: its workflow waits for a booking)
        await page.reload()
        book = page.locator('form.send[data-queue="book"]')
        await expect(book.locator("textarea")).to_have_value('{\n "traveller": "",\n "nights": 1\n}')
        await book.locator("textarea").fill('{"traveller": "Ann", "nights": 0}')
        await book.locator("button").click()
        await expect(page.locator("#flash")).to_contain_text("send book refused")
        await expect(page.locator("#flash")).to_contain_text("nights")  # the field and its rule, not the value
        await book.locator("textarea").fill('{"traveller": "Ann", "nights": 3}')
        await book.locator("button").click()
        await expect(page.locator("#flash")).to_contain_text("send book: queued")
        join = page.locator('#timeline li[data-location="reserve"]')
        await expect(join).to_contain_text("join reserve completed: flight completed, hotel completed")
        await join.locator("details.value summary").click()
        await expect(join.locator("details.value pre")).to_contain_text('"output": "hotel-3n"')
        await expect(page.locator("#waits")).to_contain_text("its deadline")
        await expect(page.locator("#state")).to_contain_text('"outcome": ""')
        # a day-long timeout, fired now: the workflow sees it reached and gives up, as it would tomorrow
        await page.click("#fire-timer")
        await expect(page.locator("#flash")).to_contain_text("fire timer: fired — the timeout of queue wait "
                                                             "wait-confirmation: due now (24.0 h early)")
        await expect(page.locator("#actor-status .status")).to_have_text("completed")
        await expect(page.locator("#state")).to_contain_text("cancelled: no confirmation within a day")
        await expect(page.locator('#timeline li[data-location="wait-confirmation"]')).to_contain_text("timed out")
        summary = page.locator('form.call[data-action="summary"]')
        await expect(summary.locator("textarea")).to_have_value('[\n ""\n]')  # its one (string) argument
        await summary.locator("textarea").fill('["the trip"]')
        await summary.locator("button").click()
        await expect(page.locator("#flash")).to_contain_text("call summary → \"the trip of Ann: cancelled")
        await page.click("#fire-timer")
        await expect(page.locator("#flash")).to_contain_text("fire timer refused: the actor is completed")
        status = await http.get_or_create("trip", "ann").status()
        history = {e.location: e for e in await http.get_or_create("trip", "ann").history()}
        assert status.output == "cancelled: no confirmation within a day"
        assert (history["wait-confirmation"].deadline or 0) < history["reserve"].created_at + DAY  # fired early
        assert seen["errors"] == [], seen["errors"]

        # headless chromium with a virtual time budget finishes the actor page (no request held open)
        for target in ("ui#/actor/trip/ann",):
            started = time.monotonic()
            process = await asyncio.create_subprocess_exec(
                CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'budget'}", "--virtual-time-budget=3000",
                "--dump-dom", f"{url}/{target}", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
            try:  # (about 5 s here; with the events long-poll the page never finished)
                dom, _ = await asyncio.wait_for(process.communicate(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()
                raise AssertionError(f"chromium did not finish {target} within 30 s") from None
            assert process.returncode == 0, time.monotonic() - started
            text = dom.decode()
            assert 'id="timeline"' in text and "cancelled: no confirmation within a day" in text


async def test_in_jwt_mode_behind_a_proxy_that_adds_the_jwt_the_page_sends_its_token_beside_it(
        browser: BrowserContext) -> None:
    """API Gateway's JWT authorizer in front of every route, the page's own too: a browser reaches the dashboard
    through a proxy that signs the user in and adds their JWT as Authorization (as it would add a SigV4 signature in
    iam mode). The page's operator token rides in X-Dormant-Operator-Token beside it, and what the page sends
    is sent by that user."""
    from tests.api.gateway import Gateway
    from tests.ui.trip_app import registry

    settings = Settings(dev=False, inspector_token="op-s3cret", auth_mode="jwt")  # type: ignore[arg-type]
    claims = {"sub": "ann", "iss": "https://issuer.example", "client_id": "dashboard"}
    async with TestEnv(registry) as env:
        gateway = Gateway(create_app(registry, settings, service=env.service), mode="jwt", tokens={"jwt-ann": claims})

        async def proxy(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http":  # the user's session becomes their JWT; anything the browser sent is replaced
                kept = [(k, v) for k, v in scope["headers"] if k.lower() != b"authorization"]
                scope = {**scope, "headers": [*kept, (b"authorization", b"Bearer jwt-ann")]}
            await gateway(scope, receive, send)

        async with serve(proxy) as url:  # type: ignore[arg-type]
            await env.client.get_or_create("trip", "ann").state()
            await env.run_until_idle()
            page = await browser.new_page()
            await page.goto(f"{url}/ui")
            await expect(page.locator("#counts-refused")).to_contain_text("operator token")
            await expect(page.locator("#token-form")).to_be_visible()
            await page.fill("#token", "op-s3cret")
            await page.click("#token-form button")
            await expect(page.locator('#types tr[data-type="trip"] td[data-status="sleeping"]')).to_have_text("1")
            await page.goto(f"{url}/ui#/actor/trip/ann")
            book = page.locator('form.send[data-queue="book"]')
            await book.locator("textarea").fill('{"traveller": "Ann", "nights": 2}')
            await book.locator("button").click()
            await expect(page.locator("#flash")).to_contain_text("send book: queued")
            await env.run_until_idle()
            message = next(e for e in await env.client.get_or_create("trip", "ann").history()
                           if e.location == "wait-booking").messages[0]
            assert message.sender is not None and (message.sender.kind, message.sender.id) == ("jwt", "ann")
            await expect(page.locator('#timeline li[data-location="reserve"]')).to_contain_text("join reserve")
            assert gateway.seen and all(seen["jwt"]["claims"]["sub"] == "ann" for seen in gateway.seen)


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


async def test_an_actor_waiting_for_a_limit_says_so_on_the_page(browser: BrowserContext) -> None:
    from dormant import Limit, StepContext, WorkflowContext, actor, setup
    from dormant.core.slots import SlotLease, SlotRequest
    from dormant.ports import ActorRef

    payer = actor("payer")

    @payer.workflow
    async def run(ctx: WorkflowContext) -> str:
        def charge(s: StepContext) -> str:
            return "charged"

        return str(await ctx.step("charge", charge, limit="stripe"))

    registry = setup(payer, limits={"stripe": Limit(concurrency=1)})
    settings = Settings(dev=False, inspector_token="s3cret", auth_mode="none")  # type: ignore[arg-type]
    async with TestEnv(registry) as env:
        held = await env.store.acquire_slot(SlotRequest(
            rule=registry.limits["stripe"].rule("stripe"), ref=ActorRef(name="payer", key=("other",)),
            holder="another worker", now=env.now(), lease_until=env.now() + 60, queued_since=env.now(), queued=False))
        assert isinstance(held, SlotLease)
        await env.client.get_or_create("payer", "p-1").status()
        await env.run_until_idle()
        async with serve(create_app(registry, settings, service=env.service)) as url:
            page = await browser.new_page()
            seen = watch(page, url)
            await page.goto(f"{url}/ui#/actor/payer/p-1")
            await page.fill("#token", "s3cret")
            await page.click("#token-form button")
            await expect(page.locator("#waits")).to_contain_text("waits for limit stripe (next try ")
            await expect(page.locator("#waits")).to_contain_text("or when a slot frees")
            await expect(page.locator('#timeline li[data-location="charge"]')).to_contain_text(
                "waits for its limit since")
            await page.goto(f"{url}/ui#/type/payer")
            await expect(page.locator('tr[data-key="p-1"] .waits')).to_contain_text("waits for limit stripe")
            assert seen["errors"] == [], seen["errors"]


async def _until(http: HttpClient, key: str | list[str], status: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = await http.get_or_create("order", key).status()
        if found.workflow.value == status:
            return found
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.2)


async def test_a_map_shows_its_items_and_how_they_ended(browser: BrowserContext, moto: MotoServer) -> None:
    from examples.bounded_map import registry

    suffix = uuid.uuid4().hex[:8]
    names = {"table": f"map-{suffix}", "queue_name": f"map-{suffix}.fifo", "timer_queue_name": f"map-t-{suffix}",
             "dlq_name": f"map-dlq-{suffix}", "fifo_dlq_name": f"map-dlq-{suffix}.fifo"}
    async with stack(registry, moto.endpoint, names) as running, HttpClient(running.api_url) as http:
        url = running.api_url
        cluster = http.get_or_create("quorum-write", "main")
        await cluster.send("writes", {"key": "doc", "value": "v"})
        page = await browser.new_page()
        seen = watch(page, url)
        await page.goto(f"{url}/ui#/actor/quorum-write/main")
        mapped = page.locator('#timeline li[data-location="write-loop/~0/replicate"]')
        # a quorum of three: two replicas at a time, so a fourth was in flight (cancelled) or had not begun
        await expect(mapped).to_contain_text("map replicate completed: 5 items, 3 succeeded")
        await mapped.locator("details.value summary").click()
        await expect(mapped.locator("details.value pre")).to_contain_text('"replica-5"')
        first = page.locator('#timeline li[data-location="write-loop/~0/replicate/0"]')
        await expect(first).to_contain_text('item 0 succeeded → "replica-1:doc"')
        assert seen["errors"] == [] and seen["outside"] == [], seen
