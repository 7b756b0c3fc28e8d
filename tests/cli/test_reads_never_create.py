"""Every read command of the CLI on a missing actor says so and creates nothing (the listing stays empty); the API
runs in a thread of its own over a TestEnv, as in tests/cli/test_send.py."""

from __future__ import annotations

import asyncio
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

READS = [["status", "account", "ghost"], ["state", "account", "ghost"], ["history", "show", "account", "ghost"],
         ["history", "export", "account", "ghost"], ["inbox", "account", "ghost"], ["versions", "account", "ghost"],
         ["doctor", "account", "ghost"]]


@pytest.fixture
def api() -> Iterator[str]:
    ready, stop = threading.Event(), threading.Event()
    found: dict[str, str] = {}

    async def main() -> None:
        async with TestEnv(registry) as env, \
                serve(create_app(registry, Settings(dev=True), service=env.service)) as url:
            found["url"] = url
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(30)
    yield found["url"]
    stop.set()
    thread.join(30)


def run(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*args, "--url", url], env={"NO_COLOR": "1", "COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())


def test_every_read_command_on_a_missing_actor_fails_and_creates_nothing(api: str) -> None:
    for command in READS:
        code, words = run(api, *command)
        assert code == 2 and "does not exist" in words, (command, words)
    code, words = run(api, "actors", "list", "--json")
    assert code == 0 and words == "[]", words
