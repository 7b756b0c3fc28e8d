"""`dormant callback complete|fail|heartbeat|status` against an API (uvicorn over a TestEnv, in a thread of its own,
in iam mode with no identity: the callback routes need none): each call, its JSON, the token from stdin, and
refusals as one red line that never shows the token."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from dormant.cli.main import app
from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from examples.payment_webhook import registry
from tests.api.support import serve


@pytest.fixture(scope="module")
def api() -> Iterator[dict[str, Any]]:
    ready, stop = threading.Event(), threading.Event()
    found: dict[str, Any] = {}

    async def main() -> None:
        async with TestEnv(registry) as env:
            for order in ("o-1", "o-2", "o-3"):
                await env.client.get_or_create("payment-checkout", [order]).send("order", {"amount_cents": 500})
            await env.run_until_idle()
            for order in ("o-1", "o-2", "o-3"):
                history = await env.client.get_or_create("payment-checkout", [order]).history()
                found[order] = next(e.callback.token for e in history if e.callback is not None)
            await env.client.complete_callback(found["o-3"], {"status": "paid", "amount_cents": 500, "reference": "r"})
            await env.run_until_idle()
            async with serve(create_app(registry, Settings(auth_mode="iam"), service=env.service)) as url:
                found["url"] = url
                found["state"] = lambda order: env.client.get_or_create("payment-checkout", [order]).state()
                ready.set()
                while not stop.is_set():
                    await asyncio.sleep(0.02)
                    await env.run_until_idle()
                    found["o-1 status"] = (await found["state"]("o-1")).status

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(30)
    yield found
    stop.set()
    thread.join(30)


def test_status_heartbeat_and_complete_from_the_command_line(api: dict[str, Any]) -> None:
    runner = CliRunner()
    url, token = api["url"], api["o-1"]
    shown = runner.invoke(app, ["callback", "status", token, "--url", url])
    assert shown.exit_code == 0, shown.output
    assert "callback payment: open, times out" in shown.output and token not in shown.output
    beat = runner.invoke(app, ["callback", "heartbeat", "-", "--url", url, "--json"], input=token + "\n")
    assert beat.exit_code == 0 and json.loads(beat.output)["status"] == "open"
    done = runner.invoke(app, ["callback", "complete", token, "--url", url, "--result",
                               '{"status": "paid", "amount_cents": 500, "reference": "cli"}'])
    assert done.exit_code == 0 and "callback payment: accepted" in done.output
    for _ in range(200):
        if api.get("o-1 status") == "paid":
            break
        threading.Event().wait(0.05)
    assert api.get("o-1 status") == "paid"


@pytest.mark.parametrize(("args", "says"), [
    (["complete", "<o-3>", "--result", '{"status": "paid", "amount_cents": 1, "reference": "other"}'],
     "CallbackCompletedError"),
    (["complete", "<o-2>", "--result", "{not json"], "--result is not valid JSON"),
    (["complete", "<o-2>", "--result", '{"status": "unpaid"}'], "InvalidMessageError"),
    (["fail", "<o-2>", "--type", ""], "error.type"),
    (["status", "dcb_not-a-token"], "InvalidCallbackTokenError"),
    (["heartbeat", "dcb_" + "Z" * 43], "CallbackNotFoundError"),
    (["status", "-"], "no token on stdin"),
])
def test_refusals_are_one_line_and_never_show_the_token(api: dict[str, Any], args: list[str], says: str) -> None:
    filled = [api[a[1:-1]] if a.startswith("<") else a for a in args]
    result = CliRunner().invoke(app, ["callback", *filled, "--url", api["url"]], input="\n")
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert not any(api[order] in result.output for order in ("o-1", "o-2", "o-3"))
