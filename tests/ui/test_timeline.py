"""Traces and the timeline on a running dev stack (issue 31), in-process: moto, the worker polling SQS, the API.

- The Done-when scenario on `dormant dev`: one `POST /actors/traced/{key}/queues/go` of a workflow whose step fails
  once and then succeeds, sleeps 2 s and runs another step yields, in the ring the dashboard reads
  (`GET /ui/spans/{actor}/{key}`), the request's span, two wake-ups (before and after the sleep), both attempts
  of the step and the second step, all in the request's trace, each with actor and location attributes.
- The dashboard's timeline in Chromium: an actor with a 3-branch join, a retried step and a sleep drawn as lanes
  (`data-lane`) of bars (`data-entry`), each attempt of the step from the spans; the page is no wider than the
  window (a screenshot's width); 600 entries in three branches draw as 601 bars in their lanes.

Tier 2 (`pytestmark`): each starts a dev stack and waits out a 2 s sleep; the first uses Chromium.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from playwright.async_api import BrowserContext, expect

from dormant.dev.stack import DevStack, free_port, run_dev_stack
from dormant.runtime import tracing
from dormant.settings import Settings
from tests.servers import MotoServer
from tests.tracing_app import registry
from tests.ui.test_dashboard import browser, moto, watch  # noqa: F401  (fixtures)
from tests.waiting import until_async

pytestmark = pytest.mark.tier2
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER = f"00-{CALLER_TRACE}-b7ad6b7169203331-01"


@asynccontextmanager
async def dev_stack(endpoint: str) -> AsyncIterator[DevStack]:
    suffix = uuid.uuid4().hex[:8]
    settings = Settings(table=f"tl-{suffix}", queue_name=f"tl-{suffix}.fifo",  # type: ignore[call-arg]
                        timer_queue_name=f"tl-timers-{suffix}", dlq_name=f"tl-dlq-{suffix}",
                        fifo_dlq_name=f"tl-dlq-{suffix}.fifo")
    async with run_dev_stack(registry, port=free_port(), endpoint_url=endpoint, settings=settings) as running:
        yield running
    assert tracing.current() is None or tracing.current().ring is None  # put back as it was  # type: ignore[union-attr]


async def spans_until(http: httpx.AsyncClient, actor: str, key: str, name: str,
                      timeout: float = 25.0) -> list[dict[str, Any]]:
    async def recorded() -> list[dict[str, Any]] | None:
        answer = (await http.get(f"/ui/spans/{actor}/{key}")).json()
        assert answer["enabled"], answer
        return list(answer["spans"]) if any(span["name"] == name for span in answer["spans"]) else None

    return await until_async(recorded, timeout=timeout, what=f"no span {name!r} served", interval=0.2)


async def test_dev_traces_a_send_through_sqs_a_retry_and_a_sleep(moto: MotoServer) -> None:  # noqa: F811
    async with dev_stack(moto.endpoint) as running, httpx.AsyncClient(base_url=running.api_url) as http:
        answer = await http.post("/actors/traced/d-1/queues/go", json={"order": "o-1"},
                                 headers={"traceparent": CALLER})
        assert answer.status_code == 202, answer.text
        spans = await spans_until(http, "traced", "d-1", "step ship")
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    [request] = by_name["POST /actors/{type}/{key}/queues/{name}"]
    assert request["trace_id"] == CALLER_TRACE and request["parent_id"] == CALLER.split("-")[2]
    wakes = by_name["dormant.wake"]
    charges = sorted(by_name["step charge"], key=lambda s: s["start"])
    [ship] = by_name["step ship"]
    [sleep] = by_name["sleep cool-off"]
    assert len(wakes) >= 2  # before and after the sleep
    assert any(w["start"] >= sleep["end"] - 0.05 for w in wakes)  # a wake-up after the sleep ran the last step
    assert [(c["attributes"]["dormant.attempt"], c["attributes"]["dormant.outcome"], c["status"]) for c in charges] \
        == [(1, "retry", "error"), (2, "completed", "unset")]
    assert sleep["end"] - sleep["start"] >= 1.9
    for span in [*wakes, *charges, ship, sleep]:
        assert span["attributes"]["dormant.actor"] == "traced"
        assert span["attributes"]["dormant.key"] == ["d-1"]
        assert span["trace_id"] == CALLER_TRACE  # one trace: the caller's, across SQS and the sleep's timer
    for span in [*charges, ship]:
        assert span["attributes"]["dormant.location"] in ("charge", "ship")
        assert span["parent_id"] in {w["span_id"] for w in wakes}


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


async def test_the_timeline_draws_branches_a_retried_step_and_a_sleep_as_lanes(
        browser: BrowserContext, moto: MotoServer) -> None:  # noqa: F811
    async with dev_stack(moto.endpoint) as running, httpx.AsyncClient(base_url=running.api_url) as http:
        assert (await http.post("/actors/lanes/l-1/queues/go", json={"order": "o-1"})).status_code == 202
        await spans_until(http, "lanes", "l-1", "step ship")
        page = await browser.new_page()
        await page.set_viewport_size({"width": 1100, "height": 900})
        seen = watch(page, running.api_url)
        await page.goto(f"{running.api_url}/ui#/actor/lanes/l-1")
        lanes = page.locator("#lanes .lane")
        await expect(page.locator('#lanes [data-entry="ship"]')).to_have_count(1)
        names = [await lane.get_attribute("data-lane") for lane in await lanes.all()]
        assert names[0] == "main" and names[-1] == "wake-ups"
        assert sorted(names[1:-1]) == ["fan-out/a", "fan-out/b", "fan-out/c"]
        for branch in "abc":
            lane = page.locator(f'#lanes [data-lane="fan-out/{branch}"]')
            await expect(lane.locator(f'[data-entry="fan-out/{branch}/{branch}-work"]')).to_have_count(1)
        main = page.locator('#lanes [data-lane="main"]')
        for entry in ("order", "fan-out", "charge", "cool-off", "ship"):
            await expect(main.locator(f'[data-entry="{entry}"]')).to_have_count(1)
        charge = main.locator('[data-entry="charge"]')
        await expect(charge).to_have_attribute("data-attempts", "2")
        await expect(charge.locator(".attempt")).to_have_count(2)  # each attempt, from the dev stack's spans
        await expect(charge.locator('.attempt[data-attempt="1"]')).to_have_class("attempt retry")
        assert await page.locator('#lanes [data-lane="wake-ups"] .bar').count() >= 2
        # bars sit on one time axis: the branches overlap in time, the sleep comes after them and before the last step
        boxes = {}
        for entry in ("fan-out/a/a-work", "fan-out/b/b-work", "fan-out/c/c-work", "cool-off", "ship"):
            box = await page.locator(f'#lanes [data-entry="{entry}"]').bounding_box()
            assert box is not None
            boxes[entry] = box
        starts = [boxes[f"fan-out/{b}/{b}-work"]["x"] for b in "abc"]
        assert max(starts) - min(starts) < boxes["cool-off"]["width"]
        assert boxes["cool-off"]["x"] > max(starts) and boxes["ship"]["x"] >= boxes["cool-off"]["x"]
        # no wider than the window: a full-page screenshot is exactly the viewport's width
        width, _ = png_size(await page.screenshot(full_page=True))
        assert width == 1100
        assert await page.evaluate("document.documentElement.scrollWidth") <= 1100
        # hundreds of entries: one bar each, in their lanes, placed in one pass (the page's own module, as it loads it)
        drawn = await page.evaluate("""async () => {
            const { lanesView } = await import("./ui/assets/lanes.js");
            const entries = [{ location: "fan", kind: "join", name: "fan", seq: 0, status: "completed",
                               created_at: 1000, updated_at: 1700, branches: { x: {}, y: {}, z: {} } }];
            for (let i = 0; i < 600; i += 1) {
                const branch = "xyz"[i % 3];
                entries.push({ location: `fan/${branch}/s${i}`, kind: "step", name: `s${i}`, seq: i + 1,
                               status: "completed", attempts: 1, created_at: 1000 + i, updated_at: 1001 + i,
                               started_at: 1000 + i, ended_at: 1000.5 + i });
            }
            const view = lanesView(entries, [], 2000);
            document.querySelector("#lanes-box").replaceChildren(view);
            return { bars: view.querySelectorAll("[data-entry]").length,
                     lanes: [...view.querySelectorAll("[data-lane]")].map((lane) => lane.dataset.lane),
                     wide: document.documentElement.scrollWidth };
        }""")
        assert drawn == {"bars": 601, "lanes": ["main", "fan/x", "fan/y", "fan/z"], "wide": 1100}
        assert seen == {"outside": [], "errors": []}
