"""`dormant pause`/`unpause` (one actor and --all), `versions`, `fork` and `reset` against an API (uvicorn over a
TestEnv in a thread of its own), as an operator types them: what they print, their exit codes, their refusals."""

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
from tests.api.support import serve
from tests.unit.test_rewind import registry, renamed


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, Any]]:
    """`now`: the API over the actors; `renamed`: a deploy of code whose first step has another name; `settled`:
    how many times the envs have been found idle (the wake-ups of a request have run once it went up by 2)."""
    ready, stop = threading.Event(), threading.Event()
    found: dict[str, Any] = {"settled": 0}

    async def main() -> None:
        async with TestEnv(registry) as env, TestEnv(registry) as old:
            for each, keys in ((env, ("a", "b")), (old, ("c",))):
                for key in keys:
                    handle = each.client.get_or_create("ledger", [key], input={"owner": key})
                    for n in (1, 2, 3):
                        await handle.send("add", {"n": n})
                        await each.run_until_idle()
            dev = Settings(dev=True, auth_mode="none")  # type: ignore[arg-type]
            async with TestEnv(renamed, store=old.store) as other, \
                    serve(create_app(registry, dev, service=env.service)) as now_url, \
                    serve(create_app(renamed, dev, service=other.service)) as renamed_url:
                found.update(now=now_url, renamed=renamed_url)
                ready.set()
                while not stop.is_set():
                    await asyncio.sleep(0.02)
                    await env.run_until_idle()
                    await other.run_until_idle()
                    found["settled"] += 1

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(30)
    yield found
    stop.set()
    thread.join(30)


def _run(*args: str, url: str, columns: int = 200) -> Any:
    return CliRunner().invoke(app, [*args, "--url", url], env={"COLUMNS": str(columns), "NO_COLOR": "1"})


def _status(key: str, url: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(_run("status", "ledger", key, "--json", url=url).stdout)
    return found


def _until(key: str, url: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    for _ in range(200):
        found = _status(key, url)
        if done(found):
            return found
        time.sleep(0.05)
    raise AssertionError(f"the actor did not get there: {found}")


def test_pause_holds_a_message_that_unpause_then_applies_once(urls: dict[str, Any]) -> None:
    url = urls["now"]
    paused = _run("pause", "ledger", "a", "--reason", "incident 7", url=url)
    assert paused.exit_code == 0 and "a: paused — sleeping -> paused by dev:dev (incident 7)" in paused.output
    sent = _run("send", "ledger", "a", "add", '{"n": 50}', url=url)
    assert sent.exit_code == 3 and "the actor is paused" in sent.output and "dormant unpause" in sent.output
    status = _run("status", "ledger", "a", url=url)
    assert "paused by dev:dev (incident 7)" in status.output and "it was sleeping" in status.output
    refused = _run("call", "ledger", "a", "get", url=url)
    assert refused.exit_code == 2
    resumed = _run("resume", "ledger", "a", url=url)
    assert resumed.exit_code == 2 and "ActorPausedError" in resumed.output
    settled, deadline = urls["settled"], time.monotonic() + 30
    while urls["settled"] < settled + 2:  # the send's wake-up has run (on a paused actor: it did nothing)
        assert time.monotonic() < deadline, "the API's envs were never idle"
        time.sleep(0.01)
    assert json.loads(_run("state", "ledger", "a", "--json", url=url).stdout)["log"] == [1, 2, 3]
    unpaused = _run("unpause", "ledger", "a", url=url)
    assert unpaused.exit_code == 0 and "paused -> sleeping" in unpaused.output
    _until("a", url, lambda s: s["workflow"] == "sleeping")
    for _ in range(100):
        if json.loads(_run("state", "ledger", "a", "--json", url=url).stdout)["log"] == [1, 2, 3, 50]:
            break
        time.sleep(0.05)
    assert json.loads(_run("state", "ledger", "a", "--json", url=url).stdout)["log"] == [1, 2, 3, 50]


def test_pause_all_and_unpause_all_report_each_actor(urls: dict[str, str]) -> None:
    url = urls["now"]
    paused = _run("pause", "--all", "--type", "ledger", "--json", url=url)
    assert paused.exit_code == 0, paused.output
    outcomes = {tuple(r["key"]): r["outcome"] for r in json.loads(paused.stdout)}
    assert {outcomes[(key,)] for key in ("a", "b")} == {"paused"}
    table = _run("pause", "ledger", "--all", url=url)  # the type as an argument, as for resume --all
    assert table.exit_code == 0 and "unchanged" in table.output
    both = _run("pause", "--all", "ledger", "--type", "other", url=url)
    assert both.exit_code == 2 and "give the actor type once" in both.output
    with_key = _run("pause", "ledger", "a", "--all", url=url)
    assert with_key.exit_code == 2 and "not a key" in with_key.output
    unpaused = _run("unpause", "--all", "--type", "ledger", "--json", url=url)
    assert unpaused.exit_code == 0
    assert {r["outcome"] for r in json.loads(unpaused.stdout)} == {"unpaused"}
    assert _run("unpause", "--all", "--type", "ledger", url=url).output.strip() == "no actors to unpause"


def test_versions_fork_and_reset_from_the_command_line(urls: dict[str, str]) -> None:
    url = urls["now"]
    listed = _run("versions", "ledger", "b", url=url)
    assert listed.exit_code == 0 and "are kept (fork or reset from any of them)" in listed.output
    kept = json.loads(_run("versions", "ledger", "b", "--json", url=url).stdout)
    states = {v["version"]: json.loads(_run("versions", "ledger", "b", "--at", str(v["version"]), "--json",
                                            url=url).stdout)["state"]["log"] for v in kept}
    with_two = min(version for version, log in states.items() if log == [1, 2])
    shown = _run("versions", "ledger", "b", "--at", str(kept[0]["version"]), url=url)
    assert shown.exit_code == 0 and "history then:" in shown.output and '"log"' in shown.output
    missing = _run("versions", "ledger", "b", "--at", "999", url=url)
    assert missing.exit_code == 2 and "VersionNotRetainedError" in missing.output and "keeps versions" in missing.output

    forked = _run("fork", "ledger", "b", "--at", str(with_two), "--as", "b~2Ccopy", "--reason", "try it", url=url)
    assert forked.exit_code == 0 and "forked from ledger['b'] at version" in forked.output, forked.output
    assert "b~2Ccopy: forked" in forked.output  # the new key, shown as typed (one part, with a comma)
    assert json.loads(_run("state", "ledger", "b~2Ccopy", "--json", url=url).stdout)["log"] == [1, 2]
    again = _run("fork", "ledger", "b", "--at", str(with_two), "--as", "b~2Ccopy", url=url)
    assert again.exit_code == 2 and "ActorExistsError" in again.output

    unconfirmed = CliRunner().invoke(app, ["reset", "ledger", "b", "--to", str(kept[0]["version"]), "--url", url],
                                     input="n\n")
    assert unconfirmed.exit_code == 2 and "not reset" in unconfirmed.output
    reset = _run("reset", "ledger", "b", "--to", str(kept[0]["version"]), "--reason", "bad deploy", "--yes",
                 url=url)
    assert reset.exit_code == 0 and "b: reset — version" in reset.output, reset.output
    status = _run("status", "ledger", "b", url=url)
    assert "reset from version" in status.output and "(bad deploy)" in status.output
    history = _run("history", "show", "ledger", "b", url=url)
    assert history.exit_code == 0 and "reset from version" in history.output and "(bad deploy)" in history.output


def test_a_fork_or_reset_that_would_diverge_shows_the_diff_and_changes_nothing(urls: dict[str, str]) -> None:
    url = urls["renamed"]
    before = _status("c", url)
    kept = json.loads(_run("versions", "ledger", "c", "--json", url=url).stdout)
    refused = _run("fork", "ledger", "c", "--at", str(kept[-1]["version"]), "--as", "c2", url=url)
    assert refused.exit_code == 2 and "WouldDivergeError" in refused.output
    assert 'history has:   step "opened"' in refused.output and 'code asks for: step "open"' in refused.output
    reset = _run("reset", "ledger", "c", "--to", str(kept[-2]["version"]), "--yes", url=url)
    assert reset.exit_code == 2 and "reset refused" in reset.output
    assert _status("c", url)["version"] == before["version"]
    assert _run("status", "ledger", "c2", url=url).exit_code == 2  # not created
