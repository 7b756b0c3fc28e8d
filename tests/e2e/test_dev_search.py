"""Search attributes as a new user meets them: a real `dormant dev` (its embedded moto server) serving
examples/order_search.py, orders sent with `dormant send`, then `dormant actors list --where` finds an order by the
attributes a step set, with their values; after a restart (the data directory kept) the index still answers."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from typer.testing import CliRunner

from dormant.cli.main import app
from tests.e2e.devprocess import DevProcess

RUNNER = CliRunner()


def cli(url: str, *args: str) -> str:
    result = RUNNER.invoke(app, [*args, "--url", url], env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert result.exit_code == 0, f"dormant {' '.join(args)} -> {result.exit_code}:\n{result.output}"
    return result.output


def wait_sleeping(url: str, key: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(f"{url}/actors/shop-order/{key}/status", timeout=10) as response:
            found = json.loads(response.read())
        if found["workflow"] == "sleeping" and found["search"]:
            return
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def test_actors_list_where_finds_an_order_by_what_a_step_set(tmp_path: Path) -> None:
    dev = DevProcess(tmp_path / "data", app="examples.order_search:registry").start()
    try:
        for key, customer, amount in [("o-1", "42", 12_500), ("o-2", "42", 4_000), ("o-3", "7", 30_000)]:
            assert "queued" in cli(dev.url, "send", "shop-order", key, "place",
                                   json.dumps({"customer": customer, "amount": amount}))
        for key in ("o-1", "o-2", "o-3"):
            wait_sleeping(dev.url, key)
        table = cli(dev.url, "actors", "list", "--where", "customer=42", "--where", "amount>10000")
        lines = table.splitlines()
        rows = [index for index, line in enumerate(lines) if "shop-order" in line]
        assert len(rows) == 1 and "o-1" in lines[rows[0]], table
        # the row and its continuation lines (a narrow listing puts one attribute per line: docs/operations.md)
        block = [lines[rows[0]]]
        for line in lines[rows[0] + 1:]:
            if not line.startswith("│") or "shop-order" in line:
                break
            block.append(line)
        assert "12500" in " ".join(block) and "accepted" in " ".join(block), table
        found = json.loads(cli(dev.url, "actors", "list", "--where", "amount>=5000", "--json"))
        assert [(row["key"], row["attributes"]["customer"]) for row in found] == [(["o-1"], "42"), (["o-3"], "7")]
        counts = json.loads(cli(dev.url, "actors", "count", "--where", "customer=42", "--json"))
        assert counts[0]["counts"]["sleeping"] == {"count": 2, "exact": True}
    finally:
        dev.stop()
    again = DevProcess(tmp_path / "data", app="examples.order_search:registry").start()  # the same data
    try:
        assert "o-3" in cli(again.url, "actors", "list", "--where", "customer=7")
    finally:
        again.stop()
