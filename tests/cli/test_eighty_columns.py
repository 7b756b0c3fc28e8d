"""The CLI at 80 columns (COLUMNS=80, as a plain terminal): every table fits without losing a key, and the words say
what happened. A `--where` listing with five attributes, `versions` with long locations (never cut mid-name), a
callback's timeout said once (not again as a "timer"), a waiting receive ("waiting", not "received -"), a finished
sleep (how long it slept, not "(in 5.0 s)"), and `history export` and `dormant replay` of that file counting alike.

The API is uvicorn over a TestEnv (dev mode) in a thread of its own; the commands run in-process (CliRunner)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from dormant import StepContext, WorkflowContext, actor, callback, queue, setup
from dormant.actor import Registry
from dormant.cli.main import app
from dormant.settings import Settings
from dormant.testing import TestEnv
from examples.order_search import registry as shop
from tests.cli.support import api_in_thread

WIDTH = 80
LONG_STEP = "hold-the-slot"  # its locations fit the `changed` column at 80 alone, not two to a line


class Note(BaseModel):
    text: str


class Approval(BaseModel):
    ok: bool


napper = actor("napper", queues={"notes": queue(Note)}, callbacks={"approval": callback(Approval)})


@napper.workflow
async def nap_run(ctx: WorkflowContext) -> None:
    await ctx.sleep("nap", 5)
    await ctx.step(LONG_STEP, lambda s: "held")

    async def iteration(loop: WorkflowContext) -> None:
        note = await loop.queue.next("take-note", timeout=3600)  # (recorded while it waits: its deadline)

        def keep(s: StepContext) -> str:
            return note.body.text
        await loop.step(f"{LONG_STEP}-again", keep)
    await ctx.loop("notes-loop", iteration, history_keep=10)


approver = actor("approver", callbacks={"approval": callback(Approval)})


@approver.workflow
async def approve_run(ctx: WorkflowContext) -> None:
    approval = await ctx.callback("approval", timeout=3600)
    await approval.result()


registry = Registry([*shop.actors.values(), *setup(napper, approver).actors.values()])


async def _prepare(env: TestEnv) -> None:
    for key, customer, amount in [("order-0001", "customer-42", 12_500), ("order-0002", "customer-42", 400)]:
        await env.client.get_or_create("shop-order", key).send("place", {"customer": customer, "amount": amount})
    await env.client.get_or_create("approver", "a-1").status()
    napping = env.client.get_or_create("napper", "n-1")
    await napping.status()
    await env.run_until_idle()
    await env.advance(6)
    for text in ("one", "two", "three"):
        await napping.send("notes", {"text": text})
        await env.run_until_idle()


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with api_in_thread(registry, settings=Settings(dev=True, auth_mode="none"), prepare=_prepare) as base:
        yield base


def run(url: str | None, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, [*args, *(["--url", url] if url else [])],
                                env={"NO_COLOR": "1", "COLUMNS": str(WIDTH)})
    assert result.exit_code == code, result.output
    return result.output


def fits(text: str) -> str:
    wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not wide, "\n".join(wide)
    return text


def test_a_where_listing_fits_and_keeps_every_key_and_value(url: str) -> None:
    text = fits(run(url, "actors", "list", "--where", "customer=customer-42", "--type", "shop-order"))
    for key in ("order-0001", "order-0002"):
        assert key in text
    assert "customer=customer-42" in text and "amount=12500" in text and "amount=400" in text


def test_versions_fit_and_never_cut_a_name(url: str) -> None:
    text = fits(run(url, "versions", "napper", "n-1"))
    found = json.loads(run(url, "versions", "napper", "n-1", "--json"))
    locations = {location for version in found for location in version["changed"] or []}
    assert f"notes-loop/~2/{LONG_STEP}-again" in locations
    for location in locations:  # each one whole, on a line of its own
        assert any(line.strip(" │").endswith(location) for line in text.splitlines()), location


def test_a_callback_timeout_is_said_once(url: str) -> None:
    text = run(url, "status", "approver", "a-1")
    assert "callback approval from an outside system (times out" in text
    assert "a timer" not in text


def test_waiting_receives_and_finished_sleeps_read_as_they_are(url: str) -> None:
    text = run(url, "history", "show", "napper", "n-1")
    assert "wait take-note: waiting" in text and "received -" not in text
    assert "sleep nap: slept 5.0 s, until " in text and "(in 5.0 s)" not in text


def test_history_export_and_replay_count_alike(url: str, tmp_path: Path) -> None:
    export = tmp_path / "n-1.jsonl"
    said = CliRunner().invoke(app, ["history", "export", "napper", "n-1", "--out", str(export), "--url", url],
                              env={"NO_COLOR": "1", "COLUMNS": str(WIDTH)})
    assert said.exit_code == 0, said.output
    replayed = run(None, "replay", str(export), "--app", "tests.cli.test_eighty_columns:registry")
    recorded = len(export.read_text().splitlines()) - 1  # (the header line, then an entry a line)
    assert f"({recorded} entries, 6 of them in finished loop iterations)" in said.output
    assert f"ok ({recorded - 6} of {recorded} recorded entries replayed (6 are in finished loop iterations" in replayed
