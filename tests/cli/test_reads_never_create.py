"""Every read command of the CLI on a missing actor says so and creates nothing (the listing stays empty); the API
runs in a thread of its own over a TestEnv, as in tests/cli/test_send.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from dormant.cli.main import app
from tests.api.apps import registry
from tests.cli.support import api_in_thread

READS = [["status", "account", "ghost"], ["state", "account", "ghost"], ["history", "show", "account", "ghost"],
         ["history", "export", "account", "ghost"], ["inbox", "account", "ghost"], ["versions", "account", "ghost"],
         ["doctor", "account", "ghost"]]


@pytest.fixture
def api() -> Iterator[str]:
    with api_in_thread(registry) as url:
        yield url


def run(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*args, "--url", url], env={"NO_COLOR": "1", "COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())


def test_every_read_command_on_a_missing_actor_fails_and_creates_nothing(api: str) -> None:
    for command in READS:
        code, words = run(api, *command)
        assert code == 2 and "does not exist" in words, (command, words)
    code, words = run(api, "actors", "list", "--json")
    assert code == 0 and words == "[]", words
