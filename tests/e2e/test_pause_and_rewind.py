"""docs/operations.md, "Pause, fork and reset", as a new user runs it: the `dormant` command against a real
`dormant dev` with the walkthrough's shop, then the next release (shop_v2) refusing a fork with the diff."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.e2e.test_dev_soak import queue_depths
from tests.e2e.test_operations import Dev, moto, shop, start_dev
from tests.servers import MotoServer

__all__ = ["moto", "shop"]  # the fixtures, imported to be used here


def _eventually(dev: Dev, args: tuple[str, ...], expected: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while True:
        output = dev.cli(*args)
        if expected in output:
            return output
        assert time.monotonic() < deadline, output
        time.sleep(0.3)


def test_pause_fork_and_reset_walkthrough(shop: Path, moto: MotoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(shop)
    on_moto = {"AWS_ENDPOINT_URL": moto.endpoint}
    dev = start_dev(shop, "shop:registry", **on_moto)
    try:
        dev.json("call", "order", "o-8", "get")
        dev.wait_for("order", "o-8", "sleeping")
        assert "waits for a message on queue ship" in dev.cli("status", "order", "o-8")
        paused = dev.cli("pause", "order", "o-8", "--reason", "the carrier's API is down")
        assert "order o-8: paused — sleeping -> paused by dev:dev (the carrier's API is down); no wake-up runs it " \
               "until unpaused (0 waiting message(s) stay in its inbox)" in paused
        sent = dev.cli("send", "order", "o-8", "ship", '{"carrier": "ups"}', code=3)
        assert "the actor is paused; the message waits in its inbox and runs once an operator unpauses it" in sent
        deadline = time.monotonic() + 60
        while any(queue_depths(moto.endpoint).values()):  # the wake-up the send made has run: it did nothing
            assert time.monotonic() < deadline, queue_depths(moto.endpoint)
            time.sleep(0.1)
        words = dev.cli("status", "order", "o-8")
        assert "order o-8: paused (version 4)" in words and "paused by dev:dev (the carrier's API is down)" in words
        assert "it was sleeping (it waited for queue(s) ship); `dormant unpause` lets it run again" in words
        assert "ActorPausedError: the actor is paused by an operator" in dev.cli("call", "order", "o-8", "get", code=2)
        assert dev.json("inbox", "order", "o-8")["total"] == 1

        unpaused = dev.cli("unpause", "order", "o-8")
        assert re.search(r"paused -> sleeping, unpaused by dev:dev \(paused by dev:dev \(the carrier's API is down\) "
                         r"for [\d.]+ s\); woken: 1 waiting message\(s\) run now", unpaused), unpaused
        done = dev.wait_for("order", "o-8", "completed")
        assert done["output"] == {"charge": "ch_o-8", "carrier": "ups"} and done["version"] == 6

        listed = dev.cli("versions", "order", "o-8")
        assert "order o-8: versions 1 to 6 are kept (fork or reset from any of them)" in listed
        kept = {v["version"]: v for v in dev.json("versions", "order", "o-8")}
        assert [kept[v]["status"] for v in range(1, 7)] == ["pending", "running", "sleeping", "paused", "sleeping",
                                                             "completed"]
        assert kept[3]["changed"] == ["charge"] and kept[6]["changed"] == ["wait-ship", "ship"]
        then = dev.cli("versions", "order", "o-8", "--at", "3")
        assert '"carrier": null' in then and 'step charge → "ch_o-8"' in then and "history then: 2 entries" in then

        forked = dev.cli("fork", "order", "o-8", "--at", "3", "--as", "o-8-again", "--reason", "ship it again")
        assert "order o-8-again: forked — forked from order['o-8'] at version 3 (2 history entries, its state and " \
               "input; an empty inbox); woken: it runs on with the code deployed here" in forked
        dev.wait_for("order", "o-8-again", "sleeping")
        dev.cli("send", "order", "o-8-again", "ship", '{"carrier": "dhl"}')
        again = dev.wait_for("order", "o-8-again", "completed")
        assert again["output"] == {"charge": "ch_o-8", "carrier": "dhl"} and again["version"] == 3
        assert "forked from order['o-8'] at version 3 by dev:dev (ship it again)" in dev.cli(
            "status", "order", "o-8-again")
        assert "ActorExistsError" in dev.cli("fork", "order", "o-8", "--at", "3", "--as", "o-8-again", code=2)

        reset = dev.cli("reset", "order", "o-8", "--to", "3", "--reason", "shipped with the wrong carrier", "--yes")
        assert "order o-8: reset — version 6 -> version 3: state and history as they were then (2 history entries " \
               "recorded since deleted); 1 message(s) received after version 3 are not given back" in reset
        timeline = _eventually(dev, ("history", "show", "order", "o-8"), "order o-8: 2 entries")
        assert "reset from version 6 to version 3 by dev:dev (shipped with the wrong carrier)" in timeline
        assert dev.json("state", "order", "o-8")["carrier"] is None
        dev.cli("send", "order", "o-8", "ship", '{"carrier": "fedex"}')
        final = dev.wait_for("order", "o-8", "completed")
        assert final["output"] == {"charge": "ch_o-8", "carrier": "fedex"} and final["version"] == 8
    finally:
        dev.stop()

    release = start_dev(shop, "shop_v2:registry", **on_moto)
    try:
        refused = release.cli("fork", "order", "o-8-again", "--at", "2", "--as", "o-8-v2", code=2)
        assert "error: WouldDivergeError: fork refused: version 2 of order['o-8-again'] does not replay against " \
               "the code deployed here, so the actor would diverge at once (nothing was stored):" in refused
        assert 'history has:   step "reserve"\n  code asks for: step "reserve-stock"' in refused
        assert "does not exist" in release.cli("status", "order", "o-8-v2", code=2)
        assert "reset refused" in release.cli("reset", "order", "o-8", "--to", "3", "--yes", code=2)
        assert release.json("status", "order", "o-8")["version"] == 8
    finally:
        release.stop()
