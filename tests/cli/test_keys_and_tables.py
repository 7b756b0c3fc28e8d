"""Keys as the CLI shows them, and the tables that hold them: any key is shown in a form every command takes
back (`key_parts`), on one line, with nothing a terminal acts on; a table never shortens a key, at any width;
and `dormant dev` without moto says what to install."""

from __future__ import annotations

import importlib.util
import os
import socket
import unicodedata
from io import StringIO
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from dormant.cli.common import SafeConsole, key_parts, key_text
from dormant.cli.main import app
from dormant.cli.render import print_table, results_table, summaries_tables
from dormant.models import OperationResult
from dormant.ports import ActorSummary
from dormant.workflow.history import WorkflowState

EXAMPLES = int(os.environ.get("DORMANT_PROPERTY_EXAMPLES", "150"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))
NOW = 1_767_225_600.0

HOSTILE = [",", "~", "~2C", ".", "..", "-", " ", "\t", "\n", "\r\n", "\x1b[2J", "\x9b", "\x7f", "\u202e", "\u2066",
           "\u200b", "\u00a0", "\u3000", "\u2028", "\ufeff", "%2C", "é", "東", "👩\u200d💻", "[bold]", ":smile:"]
part = st.lists(st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from(HOSTILE)), min_size=1,
                max_size=12).map("".join)
keys = st.lists(part, min_size=1, max_size=4).map(tuple)


def invisible(text: str) -> list[str]:
    """What a person could not see or tell apart in a key: controls, format characters, whitespace."""
    return [ch for ch in text if unicodedata.category(ch)[0] in "CZ"]


@SETTINGS
@given(keys)
def test_a_shown_key_reads_back_as_the_same_key(key: tuple[str, ...]) -> None:
    shown = key_text(key)
    assert key_parts(shown) == key  # what `dormant status T <shown>` etc. look up
    assert invisible(shown) == [] and not shown.startswith("-")  # one visible word, never read as an option


@SETTINGS
@given(st.lists(st.text("abcXYZ019-._é東", min_size=1, max_size=8), min_size=1, max_size=3).map(tuple))
def test_plain_keys_are_shown_as_they_are(key: tuple[str, ...]) -> None:
    if key[0].startswith("-") or any(p in (".", "..") for p in key):
        return
    assert key_text(key) == ",".join(key)


def test_the_cases_from_the_issue() -> None:
    assert key_text(("sales,emea",)) == "sales~2Cemea" and key_text(("sales", "emea")) == "sales,emea"
    assert key_text(("\x1b[2J\x1b[31mRED",)) == "~1B[2J~1B[31mRED"
    assert key_text(("a\r\nERROR",)) == "a~0D~0AERROR" and key_text((".",)) == "~2E"
    assert key_text(("-rf",)) == "~2Drf" and key_text(("a", "-b")) == "a,-b"


def summaries(*found: tuple[str, ...]) -> list[ActorSummary]:
    return [ActorSummary(name="doc-approvals", key=key, status=WorkflowState.SLEEPING, since=NOW - 90, version=2,
                         created_at=NOW - 100) for key in found]


def printed(width: int, render: Any) -> str:
    console = SafeConsole(file=StringIO(), width=width, color_system=None)
    render(console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(text, str)
    return text


def key_cells(table: str) -> list[str]:
    cells = [line.split("│")[2].strip() for line in table.splitlines() if line.startswith("│")]
    return [cell for cell in cells if cell]


WIDE = ("tenant-" + "x" * 100,)


@pytest.mark.parametrize("width", [200, 80, 60, 20])
def test_listings_show_every_key_whole_at_any_width(width: int) -> None:
    found = [("sales,emea",), ("sales", "emea"), ("k",), ("order-000000000000000042",), WIDE]
    text = printed(width, lambda c: print_table(c, summaries_tables(summaries(*found), NOW)))
    assert key_cells(text) == [key_text(k) for k in found]
    assert "…" not in text  # nothing cut: no column is shortened
    assert "doc-approvals" in text and text.count("sleeping") == len(found)


def test_the_listing_fits_the_terminal_when_its_keys_do() -> None:
    found = [("order-42",), ("tenant", "7")]
    roomy = printed(80, lambda c: print_table(c, summaries_tables(summaries(*found), NOW)))
    assert "2025-12-31 23:58:30 UTC (1m 30s ago)" in roomy  # the full moment where it fits
    assert all(len(line) <= 80 for line in roomy.splitlines())
    narrow = printed(60, lambda c: print_table(c, summaries_tables(summaries(*found), NOW)))
    assert all(len(line) <= 60 for line in narrow.splitlines())
    assert "1m 30s ago" in narrow and key_cells(narrow) == ["order-42", "tenant,7"]
    assert "version" not in roomy  # the listing's version is the one that entered the status: not shown


def test_rich_alone_would_hide_the_keys() -> None:
    """Why print_table exists: Rich shrinks every column of a too-wide table, keys first to nothing."""
    console = Console(file=StringIO(), width=80, color_system=None)
    console.print(summaries_tables(summaries(WIDE), NOW)[-1])
    assert WIDE[0] not in console.file.getvalue()  # type: ignore[attr-defined]


def test_results_wrap_their_message_never_their_key() -> None:
    results = [OperationResult(actor="doc-approvals", key=list(key), status=WorkflowState.FAILED, operation="resume",
                               outcome="retrying",
                               message="step(s) notes/~0/record run again with a fresh attempt count " * 3)
               for key in (("sales,emea",), ("order-000000000000000042",))]
    text = printed(100, lambda c: print_table(c, [results_table(results)]))
    assert key_cells(text) == ["sales~2Cemea", "order-000000000000000042"]
    assert all(len(line) <= 100 for line in text.splitlines())  # the message wrapped instead
    assert len(text.splitlines()) > 2 * 3 + 4
    assert "attempt count" in text and "…" not in text


def test_dev_without_moto_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "moto" else real(name, *a))
    result = CliRunner().invoke(app, ["dev", "--app", "examples.counter:registry"],
                                env={"DORMANT_ENDPOINT_URL": None, "AWS_ENDPOINT_URL": None})
    assert result.exit_code == 2
    assert "install `dormant[dev]`" in result.output and "--endpoint" in result.output


@pytest.mark.parametrize("error", [RuntimeError("peer said \x1b[2J\x9b31m\u202eevil\r\nERROR forged"),
                                   OSError("peer said \x1b[2J\x9b31m\u202eevil\r\nERROR forged")])
def test_any_error_is_one_escaped_line(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    """Whatever an error's text holds (a server's answer, a transport's message), it is printed on one line."""
    def failing(url: str, token: str | None) -> None:
        raise error

    monkeypatch.setattr("dormant.cli.actor.client", failing)
    result = CliRunner().invoke(app, ["status", "ledger", "main"])
    assert result.exit_code == 2
    assert result.stderr == (f"error: {type(error).__name__}: peer said \\x1b[2J\\x9b31m\\u202eevil\\r\\nERROR "
                             "forged\n")


def test_dev_on_a_taken_port_says_so_in_a_line(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["dev", "--app", "examples.counter:registry", "--port", str(port),
                                          "--in-memory"], env={"DORMANT_ENDPOINT_URL": None, "AWS_ENDPOINT_URL": None})
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"dormant dev: the API cannot listen on 127.0.0.1:{port}: ")
    assert "--port" in result.stderr and "Traceback" not in result.output and result.stderr.count("\n") == 1
