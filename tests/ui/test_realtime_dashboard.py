"""The dashboard's actor page over `dormant dev`'s WebSocket API (realtime.js, docs/realtime.md): a step's broadcast
shows up pushed, with no events request after the page subscribed; the module's `call` runs actions over the socket."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from playwright.async_api import BrowserContext, expect

from dormant.dev.stack import free_port, run_dev_stack
from dormant.http.client import HttpClient
from dormant.settings import Settings
from tests.realtime_app import registry
from tests.servers import MotoServer
from tests.ui.test_dashboard import browser as browser
from tests.ui.test_dashboard import watch


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    server = MotoServer()
    server.start()
    yield server
    server.stop()


async def test_the_actor_page_shows_pushed_events_without_polling(browser: BrowserContext,
                                                                   moto: MotoServer) -> None:
    suffix = uuid.uuid4().hex[:8]
    settings = Settings(table=f"rt-ui-{suffix}", queue_name=f"rt-ui-{suffix}.fifo",  # type: ignore[call-arg]
                        timer_queue_name=f"rt-ui-timers-{suffix}", endpoint_url=moto.endpoint)
    async with run_dev_stack(registry, port=free_port(), settings=settings) as running, \
            HttpClient(running.api_url) as http:
        handle = http.get_or_create("notes", ["page,1"])  # a key with a comma: the page decodes its segment
        await handle.send("notes", {"text": "before"})
        page = await browser.new_page()
        seen = watch(page, running.api_url)
        polls: list[str] = []
        page.on("request", lambda request: polls.append(request.url) if "/events" in request.url else None)
        await page.goto(f"{running.api_url}/ui#/actor/notes/page~2C1")
        events = page.locator("#events")
        await expect(events).to_have_attribute("data-live", "pushed")
        await expect(events.locator('li[data-seq="1"]')).to_contain_text("before")
        sent = time.monotonic()
        await handle.send("notes", {"text": "pushed"})
        await expect(events.locator('li[data-seq="2"]')).to_contain_text("pushed")
        print(f"shown {(time.monotonic() - sent) * 1000:.0f} ms after the send")  # measured, not asserted
        await expect(events.locator("li")).to_have_count(2)  # each once
        assert polls == [] and seen["errors"] == [] and seen["outside"] == []


async def test_the_browser_module_calls_actions_over_the_socket(browser: BrowserContext, moto: MotoServer) -> None:
    suffix = uuid.uuid4().hex[:8]
    settings = Settings(table=f"rt-uc-{suffix}", queue_name=f"rt-uc-{suffix}.fifo",  # type: ignore[call-arg]
                        timer_queue_name=f"rt-uc-timers-{suffix}", endpoint_url=moto.endpoint)
    async with run_dev_stack(registry, port=free_port(), settings=settings) as running, \
            HttpClient(running.api_url) as http:
        assert await http.get_or_create("notes", ["page-call"]).call("add", 1) == 1  # over HTTP
        page = await browser.new_page()
        seen = watch(page, running.api_url)
        await page.goto(f"{running.api_url}/ui")
        answers = await page.evaluate("""async (url) => {
            const { subscribe } = await import("/ui/assets/realtime.js");
            let opened;
            const ready = new Promise((resolve) => { opened = resolve; });
            const sub = subscribe({ url, actor: "notes", key: ["page-call"], onEvent: () => {},
                                    onOpen: () => opened() });
            await ready;
            const total = await sub.call("add", 2);
            const refused = [];
            for (const [name, args] of [["nope", []], ["add", ["three"]]]) {
                try { await sub.call(name, ...args); } catch (error) { refused.push([error.code, error.status]); }
            }
            sub.close();
            return { total, refused };
        }""", running.api_url.replace("http://", "ws://") + "/realtime")
        assert answers == {"total": 3, "refused": [["unknown_action", 404], ["invalid_arguments", 422]]}
        assert (await http.get_or_create("notes", ["page-call"]).state())["count"] == 3
        assert seen["errors"] == [] and seen["outside"] == []
