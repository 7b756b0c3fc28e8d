"""`dormant actors list --where` and `dormant actors count --where` against an API (uvicorn over a TestEnv, in a thread
of its own): orders found by the attributes their steps set, shown with them (whatever characters they hold), the
counts per status of the matches, and one clear line for conditions that cannot be read."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from dormant import actor, setup
from dormant.actor import Registry
from dormant.cli.main import app
from dormant.settings import Settings
from dormant.testing import TestEnv
from examples.order_search import registry as shop
from tests.cli.support import api_in_thread

plain = actor("plain")  # declares no search attributes: `--where` without `--type` leaves it out
registry = Registry([*shop.actors.values(), *setup(plain).actors.values()])
HOSTILE = "evil\u202e[bold]x"  # a bidi override and Rich markup (control characters are refused when set)


async def _prepare(env: TestEnv) -> None:
    for key, customer, amount in [("o-1", "42", 12_500), ("o-2", "42", 4_000), ("o-3", HOSTILE, 30_000)]:
        await env.client.get_or_create("shop-order", key).send("place", {"customer": customer, "amount": amount})
    await env.run_until_idle()
    await env.client.get_or_create("shop-order", "o-2").send("ship", {"carrier": "ups"})
    await env.client.get_or_create("plain", "p").status()
    await env.run_until_idle()


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with api_in_thread(registry, settings=Settings(dev=True, auth_mode="none"), prepare=_prepare) as base:
        yield base


def run(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*args, "--url", url], env={"NO_COLOR": "1", "COLUMNS": "200"})
    return result.exit_code, result.output


def test_list_where_finds_actors_by_the_attributes_their_steps_set(url: str) -> None:
    code, out = run(url, "actors", "list", "--where", "customer=42", "--where", "amount>10000")
    assert code == 0, out
    lines = [line for line in out.splitlines() if "o-" in line]
    # (a column per attribute where they fit, else one column of `name=value` lines: tests/cli/test_eighty_columns)
    assert len(lines) == 1 and "o-1" in lines[0] and "12500" in out and "accepted" in out
    assert "amount" in out and "customer" in out and "placed_at" in out
    code, out = run(url, "actors", "list", "-w", "amount>=0", "--status", "completed")
    assert code == 0 and next(line for line in out.splitlines() if "o-" in line).split("│")[2].strip() == "o-2"
    code, out = run(url, "actors", "list", "--where", "stage=lost")
    assert (code, out.strip()) == (0, "no actors match")


def test_json_gives_the_attributes_and_the_table_escapes_them(url: str) -> None:
    code, out = run(url, "actors", "list", "--where", "amount>=0", "--json")
    assert code == 0, out
    rows = json.loads(out)
    assert [r["key"] for r in rows] == [["o-2"], ["o-1"], ["o-3"]] and rows[2]["attributes"]["customer"] == HOSTILE
    assert {r["segment"] for r in rows} == {"o-1", "o-2", "o-3"} and "\u202e" not in out
    code, out = run(url, "actors", "list", "--where", "customer^=evil")
    assert code == 0 and "\u202e" not in out and "evil\\u202e[bold]x" in out


def test_count_where_counts_the_matches_per_status(url: str) -> None:
    code, out = run(url, "actors", "count", "--where", "customer=42", "--json")
    assert code == 0, out
    [counts] = json.loads(out)
    assert counts["actor"] == "shop-order"
    assert (counts["counts"]["sleeping"]["count"], counts["counts"]["completed"]["count"]) == (1, 1)
    code, out = run(url, "actors", "count")
    assert code == 0 and "shop-order" in out and "plain" in out
    code, out = run(url, "actors", "count", "--type", "shop-order", "--where", "amount>0", "--limit", "2")
    row = next(line for line in out.splitlines() if "shop-order" in line)
    assert code == 0 and [cell.strip() for cell in row.split("│")[2:5]] == ["0+", "1+", "1+"]  # the first two


def test_status_shows_the_attributes(url: str) -> None:
    code, out = run(url, "status", "shop-order", "o-1")
    assert code == 0 and "search attributes: amount=12500, customer=42, express=true" in out


def test_conditions_that_cannot_be_read_are_one_line_and_exit_2(url: str) -> None:
    code, out = run(url, "actors", "list", "--where", "amount>lots")
    assert code == 2 and out.count("\n") == 1 and 'where condition 1: attribute "amount" is an int' in out
    code, out = run(url, "actors", "list", "--where", "nope=1")
    assert code == 2 and "no actor type the API serves declares the search attribute(s) nope" in out
    code, out = run(url, "actors", "list", "--type", "plain", "--where", "nope=1")
    assert code == 2 and 'actor type "plain" declares no search attributes' in out
    code, out = run(url, "actors", "list", "--where", "=42")  # no attribute named: read by the declaring types
    assert code == 2 and "where condition 1 is not `attribute<op>value`" in out
