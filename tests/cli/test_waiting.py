"""`dormant inbox` and `dormant fire-timer` against an API (uvicorn over a TestEnv, in a thread of its own): the
messages a failed actor keeps, a 24-hour sleep fired from the command line under a dev-mode API, and a clear
error from an API that is not `dormant dev`."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from dormant.cli.main import app
from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.apps import registry
from tests.api.support import serve


@pytest.fixture(scope="module")
def apis() -> Iterator[dict[str, str]]:
    """Two APIs over one TestEnv: `dev` (dormant dev's settings) and `deployed` (no dev routes)."""
    ready = threading.Event()
    stop = threading.Event()
    found: dict[str, str] = {}

    async def main() -> None:
        async with TestEnv(registry) as env:
            await env.client.get_or_create("sleeper", ["s1"]).send("go", 1)
            await env.run_until_idle()
            dev = Settings(dev=True, auth_mode="none")  # type: ignore[arg-type]
            deployed = Settings(dev=False, auth_mode="none", inspector_token="t")  # type: ignore[arg-type]
            async with serve(create_app(registry, dev, service=env.service)) as dev_url, \
                    serve(create_app(registry, deployed, service=env.service)) as deployed_url:
                found.update(dev=dev_url, deployed=deployed_url)
                ready.set()
                while not stop.is_set():
                    await asyncio.sleep(0.02)
                    await env.run_until_idle()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(30)
    yield found
    stop.set()
    thread.join(30)


def test_fire_timer_wakes_a_sleeper_now_and_the_inbox_shows_what_waits(apis: dict[str, str]) -> None:
    runner = CliRunner()
    url = apis["dev"]
    refused = runner.invoke(app, ["fire-timer", "sleeper", "s1", "--url", apis["deployed"], "--token", "t"])
    assert refused.exit_code == 2 and "only `dormant dev` serves fire-timer" in refused.output
    fired = runner.invoke(app, ["fire-timer", "sleeper", "s1", "--url", url, "--json"])
    assert fired.exit_code == 0, fired.output
    assert json.loads(fired.stdout)["outcome"] == "fired" and "sleep nap" in json.loads(fired.stdout)["message"]
    _until(runner, url, lambda s: s["waiting_for"]["retry_at"] is not None)  # the step failed once: a retry waits
    again = runner.invoke(app, ["fire-timer", "sleeper", "s1", "--url", url])
    assert again.exit_code == 0 and "the retry of step flaky" in again.output
    _until(runner, url, lambda s: s["workflow"] == "failed")
    nothing = runner.invoke(app, ["fire-timer", "sleeper", "s1", "--url", url])
    assert nothing.exit_code == 2 and "no timer to fire" in nothing.output

    empty = runner.invoke(app, ["inbox", "sleeper", "s1", "--url", url])
    assert empty.exit_code == 0 and "no messages waiting" in empty.output
    sent = runner.invoke(app, ["send", "sleeper", "s1", "go", "42", "--id", "later-1", "--url", url])
    # Stored, and the CLI says at once it waits for a resume (exit 3: the workflow has stopped).
    assert sent.exit_code == 3 and "waits in its inbox" in sent.output and "dormant resume" in sent.output, sent.output
    table = runner.invoke(app, ["inbox", "sleeper", "s1", "--url", url], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "later-1" in table.output and "42" in table.output
    listed = json.loads(runner.invoke(app, ["inbox", "sleeper", "s1", "--url", url, "--json"]).stdout)
    assert listed["total"] == 1 and listed["messages"][0]["id"] == "later-1"


def _until(runner: CliRunner, url: str, done: Callable[[dict[str, Any]], bool]) -> None:
    """Poll `dormant status` until `done(status)`: the API's runner takes the wake-up within a few loop turns."""
    for _ in range(200):
        found: dict[str, Any] = json.loads(runner.invoke(app, ["status", "sleeper", "s1", "--url", url,
                                                                "--json"]).stdout)
        if done(found):
            return
        time.sleep(0.05)
    raise AssertionError(f"the actor did not get there: {found}")
