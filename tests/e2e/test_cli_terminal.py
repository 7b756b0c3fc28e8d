"""The `dormant` command as an operator meets it, against a real `dormant dev` holding actors with hostile keys
and bodies: an 80-column pipe (COLUMNS=80, no terminal), where every key is shown whole, in a form the commands
take back, and no control character of the data reaches the output, the errors or the dev console."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
import unicodedata
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dormant.cli.common import key_text
from dormant.cli.main import app
from dormant.http.client import HttpClient
from dormant.http.keys import encode_key
from tests.e2e.devprocess import DevProcess, environment

DORMANT = str(Path(sys.executable).with_name("dormant"))  # the console script, as a user runs it
RUNNER = CliRunner()
LONG = "tenant-" + "x" * 90 + "-end"  # wider than an 80-column table on its own
KEYS: list[tuple[str, ...]] = [
    ("\x1b[2J\x1b[31mRED",), ("line\nERROR 2026-12-01 09:00:00.000 ERROR wake forged",), ("crlf\r\nINFO forged",),
    ("sales,emea",), ("sales", "emea"), ("\u202eevil\u202c",), ("c1\x9b31m",), ("tab\tsep",), ("bell\x07",),
    ("del\x7f",), ("tilde~2C",), (".",), ("..",), ("-flag",), (":warning:",), ("[bold]markup[/bold]",),
    ("José 東京",), ("zero\u200bwidth",), ("lsep\u2028x",), (LONG,), ("p1", "p2", "p3"),
]
FAILING = {("\x1b[2J\x1b[31mRED",), (LONG,), ("crlf\r\nINFO forged",), ("sales,emea",)}
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")


def raw_controls(text: str) -> list[str]:
    """What a terminal would act on: controls (but the line feeds between lines), bidi controls, separators."""
    return sorted({repr(ch) for ch in text if ch != "\n" and (unicodedata.category(ch) == "Cc" or ch in BIDI)})


def note(key: tuple[str, ...]) -> str:
    return (f"{'fail:' if key in FAILING else ''}note of {list(key)!r} \x1b[2J\r\nERROR forged \u202eRTL\u202c \x9b31m "
            + "b" * 200 + " END")


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevProcess]:
    process = DevProcess(tmp_path_factory.mktemp("hostile") / "data", app="tests.e2e.hostile_app:registry",
                         env=environment(NO_COLOR="1"))
    process.start()
    try:
        asyncio.run(_populate(process.url))
        yield process
    finally:
        process.kill()


async def _populate(url: str) -> None:
    async with HttpClient(url) as http:
        for key in KEYS:
            await http.get_or_create("ledger", key).send("note", {"text": note(key)})
        deadline = time.monotonic() + 60
        while True:  # every wake-up ran: the failing ones listed failed, the others sleeping with their note
            found = {tuple(s.key): s.status.value async for s in http.actors("ledger")}
            settled = len(found) == len(KEYS) and all(
                found[k] == ("failed" if k in FAILING else "sleeping") for k in KEYS)
            if settled and all([(await http.get_or_create("ledger", k).state())["texts"]
                                for k in KEYS if k not in FAILING]):
                return
            assert time.monotonic() < deadline, found
            await asyncio.sleep(0.2)


def dormant(dev: DevProcess, *args: str, code: int = 0, styled: bool = False,
            **env: str) -> subprocess.CompletedProcess[str]:
    """The console script in a pipe, 80 columns wide, no terminal (`styled`: Rich's colours are expected)."""
    variables = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}  # set only where a test says so
    variables.update(DORMANT_URL=dev.url, COLUMNS="80", **env)
    result = subprocess.run([DORMANT, *args], capture_output=True, text=True, env=variables, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == code, f"dormant {args} -> {result.returncode}:\n{result.stdout}\n{result.stderr}"
    assert raw_controls(result.stderr) == [], result.stderr
    assert raw_controls(result.stdout.replace("\x1b", "") if styled else result.stdout) == [], result.stdout
    return result


def cli(dev: DevProcess, *args: str, code: int = 0) -> Any:
    """A command run in this process (where the terminal's width does not matter: faster than the script)."""
    result = RUNNER.invoke(app, [*args, "--url", dev.url])
    assert result.exit_code == code, f"dormant {args} -> {result.exit_code}:\n{result.output}"
    assert raw_controls(result.stdout) == [] and raw_controls(result.stderr) == [], result.output
    return result


def key_cells(table: str) -> list[str]:
    """The key column of a table printed by the CLI (the second cell of each body row; a row's wrapped lines
    have an empty one)."""
    cells = [line.split("│")[2].strip() for line in table.splitlines() if line.startswith("│")]
    return [cell for cell in cells if cell]


def test_every_key_is_listed_whole_at_80_columns(dev: DevProcess) -> None:
    listing = dormant(dev, "actors", "list").stdout
    shown = key_cells(listing)
    assert sorted(shown) == sorted(key_text(k) for k in KEYS)
    assert LONG in shown and "sales~2Cemea" in shown and "sales,emea" in shown and "José~20東京" in shown
    assert "~1B[2J~1B[31mRED" in shown and "~E2~80~AEevil~E2~80~AC" in shown and "~2Dflag" in shown
    assert "…" not in listing  # nothing shortened
    failed = key_cells(dormant(dev, "actors", "list", "--status", "failed", NO_COLOR="1").stdout)
    assert sorted(failed) == sorted(key_text(k) for k in FAILING)


def test_a_colour_terminal_gets_only_the_cli_s_own_styles(dev: DevProcess) -> None:
    listing = dormant(dev, "actors", "list", styled=True, FORCE_COLOR="1", TERM="xterm-256color").stdout
    assert "\x1b[" in listing  # styled: the check below means something
    assert "\x1b[2J" not in listing and "\x1b[31mRED" not in listing
    assert all(chunk.split("m", 1)[0].replace(";", "").isdigit() or chunk.startswith("m")
               for chunk in listing.split("\x1b[")[1:]), "an escape sequence other than a colour"


def test_each_shown_key_reaches_its_actor(dev: DevProcess) -> None:
    for key, cell in zip(sorted(KEYS, key=key_text), sorted(key_cells(dormant(dev, "actors", "list").stdout)),
                         strict=True):
        state = cli(dev, "state", "ledger", cell, "--json")
        assert json.loads(state.stdout)["texts"] == ([] if key in FAILING else [note(key)]), cell
        words = cli(dev, "status", "ledger", cell).stdout
        assert words.startswith(f"ledger {cell}: {'failed' if key in FAILING else 'sleeping'} (version "), words


def test_the_json_listing_has_the_segment(dev: DevProcess) -> None:
    rows: list[dict[str, Any]] = json.loads(dormant(dev, "actors", "list", "--json").stdout)
    assert sorted(tuple(r["key"]) for r in rows) == sorted(KEYS)  # exactly, C0 and all (JSON escapes them)
    for row in rows:
        assert row["segment"] == encode_key(row["key"])
        assert set(row) == {"name", "key", "status", "since", "version", "created_at", "segment"}
        with urllib.request.urlopen(f"{dev.url}/actors/ledger/{row['segment']}/status", timeout=10) as response:
            assert json.loads(response.read())["workflow"] == row["status"]


def test_history_shows_whole_bodies_escaped(dev: DevProcess) -> None:
    key = ("\x1b[2J\x1b[31mRED",)  # a failed one: its message and its error
    timeline = dormant(dev, "history", "show", "ledger", key_text(key)).stdout
    assert timeline.startswith(f"ledger {key_text(key)}: 3 entries\n")
    assert "b" * 200 + " END" in timeline  # the body is not cut
    assert "\\u001b[2J\\r\\nERROR forged \\u202eRTL\\u202c \\u009b31m" in timeline  # escaped as JSON does
    assert "ValueError: fail:note of" in timeline and "\\x1b[2J\\r\\nERROR forged \\u202eRTL" in timeline
    assert not any(line.startswith("ERROR") for line in timeline.splitlines())
    state = cli(dev, "state", "ledger", key_text(("sales", "emea"))).stdout  # Rich's pretty JSON
    assert "\\u001b[2J\\r\\nERROR forged \\u202eRTL\\u202c \\u009b31m" in state and "b" * 200 in state


def test_resume_results_keep_their_keys(dev: DevProcess) -> None:
    resumed = dormant(dev, "resume", "--all", "--status", "failed", "ledger").stdout
    assert sorted(key_cells(resumed)) == sorted(key_text(k) for k in FAILING)
    one = cli(dev, "resume", "ledger", key_text((LONG,))).stdout
    assert one.startswith(f"ledger {LONG}: ")


def test_errors_and_exports_are_printed_safely(dev: DevProcess, tmp_path: Path) -> None:
    missing = cli(dev, "status", "ledger", "nobody~1B[2J~0D~0AERROR", code=2).stderr
    assert missing.startswith("error: ledger nobody~1B[2J~0D~0AERROR does not exist ") and missing.count("\n") == 1
    refused = dormant(dev, "call", "ledger", "sales,emea", "refuse", '"\\u001b[2J\\u009b\\r\\nERROR forged"',
                      code=2).stderr  # the action's error, as the API returns it
    assert refused.startswith("error: ") and refused.count("\n") == 1, refused
    assert "ValueError: \\x1b[2J\\x9b\\r\\nERROR forged" in refused
    assert "bad actor key" in cli(dev, "status", "ledger", "bad~ZZ", code=2).stderr
    exported = cli(dev, "history", "export", "ledger", key_text(("\u202eevil\u202c",)))
    types = [json.loads(line)["type"] for line in exported.stdout.splitlines()]
    assert types[0] == "actor" and types.count("entry") == 3  # the loop, its wait, its step
    target = tmp_path / "evil.jsonl"
    written = cli(dev, "history", "export", "ledger", key_text(("\u202eevil\u202c",)), "--out", str(target))
    assert written.stdout == "" and ("wrote the history of ledger ~E2~80~AEevil~E2~80~AC (3 entries, 2 of them in "
                                     "finished loop iterations)") in written.stderr
    assert target.read_text(encoding="utf-8") == exported.stdout  # the same export, here with ASCII escapes


def test_the_dev_console_escapes_what_callers_sent(dev: DevProcess) -> None:
    for path in ("/actors/ledger/%1B%5B2J%1B%5B31mRED/status", "/actors/ledger/x%0D%0AERROR%20forged/status",
                 "/actors/ledger/%E2%80%AEevil/status"):
        try:
            urllib.request.urlopen(dev.url + path, timeout=10).close()
        except urllib.error.HTTPError as error:
            assert error.code in (400, 404)
    with socket.create_connection(("127.0.0.1", dev.port), timeout=10) as raw:  # not even HTTP: uvicorn's warning
        raw.sendall(b"GET /\x1b[2J\r\nERROR forged HTTP/1.1\r\nHost: x\r\n\r\n")
        raw.recv(1000)
    deadline = time.monotonic() + 10
    while "\\x1b[2J\\x1b[31mRED" not in dev.output() or "Invalid HTTP request" not in dev.output():
        assert time.monotonic() < deadline, dev.output()[-2000:]
        time.sleep(0.1)
    console = dev.output()
    assert raw_controls(console) == [], raw_controls(console)
    assert "x\\r\\nERROR forged" in console and "\\u202eevil" in console
    assert not any(line.startswith("ERROR") for line in console.splitlines())
    (invalid,) = [line for line in console.splitlines() if "Invalid HTTP request" in line]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} WARNING api   Invalid HTTP request received\.", invalid)
