"""The CLI against an API that needs the inspector token: `--token`, DORMANT_INSPECTOR_TOKEN, and a clear error
without it. The API (uvicorn over a TestEnv) runs in a thread of its own; the commands run in-process."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from dormant.cli.main import app
from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.apps import registry
from tests.api.support import serve

TOKEN = "cli-s3cret"


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    ready = threading.Event()
    stop = threading.Event()
    found: dict[str, str] = {}

    async def main() -> None:
        async with TestEnv(registry) as env:
            for key in ("alice", "bob"):
                await env.client.get_or_create("account", [key]).send("deposit", {"amount": 3})
            await env.run_until_idle()
            settings = Settings(dev=False, inspector_token=TOKEN, auth_mode="none")  # type: ignore[arg-type]
            async with serve(create_app(registry, settings, service=env.service)) as url:
                found["url"] = url
                ready.set()
                while not stop.is_set():
                    await asyncio.sleep(0.05)
                    await env.run_until_idle()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(30)
    yield found["url"]
    stop.set()
    thread.join(30)


def test_listing_needs_the_token(api: str) -> None:
    runner = CliRunner()
    refused = runner.invoke(app, ["actors", "list", "--url", api], env={"DORMANT_INSPECTOR_TOKEN": None})
    assert refused.exit_code == 2 and "401 unauthorized" in refused.output
    by_option = runner.invoke(app, ["actors", "list", "--type", "account", "--url", api, "--token", TOKEN, "--json"])
    assert by_option.exit_code == 0, by_option.output
    assert [row["key"] for row in json.loads(by_option.stdout)] == [["alice"], ["bob"]]
    by_env = runner.invoke(app, ["actors", "list", "-t", "account", "--json"],
                           env={"DORMANT_INSPECTOR_TOKEN": TOKEN, "DORMANT_URL": api})
    assert by_env.exit_code == 0 and json.loads(by_env.stdout) == json.loads(by_option.stdout)


def test_reads_and_sends_need_no_token_and_unknown_things_are_errors(api: str) -> None:
    runner = CliRunner()
    state = runner.invoke(app, ["state", "account", "alice", "--url", api, "--json"])
    assert state.exit_code == 0 and json.loads(state.stdout)["balance"] == 3
    sent = runner.invoke(app, ["send", "account", "alice", "deposit", '{"amount": 2}', "--url", api, "--json"])
    assert sent.exit_code == 0 and json.loads(sent.stdout)["status"] == "queued"
    bad = runner.invoke(app, ["send", "account", "alice", "deposit", "{oops", "--url", api])
    assert bad.exit_code == 2 and "not valid JSON" in bad.output
    unknown = runner.invoke(app, ["status", "nobody", "x", "--url", api])
    assert unknown.exit_code == 2 and "no actor type" in unknown.output
    assert runner.invoke(app, ["resume", "account", "--url", api]).exit_code == 2  # a key, or --all
    unreachable = runner.invoke(app, ["state", "account", "alice", "--url", "http://127.0.0.1:9"])
    assert unreachable.exit_code == 2 and "error:" in unreachable.output
