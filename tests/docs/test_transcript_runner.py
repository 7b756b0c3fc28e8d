"""tests/docs/transcript.py compares what matters: a changed word, a wrong exit code or a different id fails; times,
durations, ports and column widths do not (plain shell commands here: no dev stack)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.blocks import Block
from tests.docs.transcript import Session


def transcript(text: str) -> Block:
    return Block("docs/example.md", 1, "console", text, "example", None)


def run(tmp_path: Path, text: str) -> None:
    Session(tmp_path, deadline=0).run(transcript(text))


def test_what_varies_is_normalized(tmp_path: Path) -> None:
    run(tmp_path, "$ echo 'since 2026-12-05 18:00:14 UTC (1m 51s ago), in 12 ms, at 127.0.0.1:41234'\n"
                  "since 2026-12-02 02:12:43 UTC (17.2 s ago), in 0 ms, at 127.0.0.1:8787\n"
                  "$ printf '│ o-1 │ done    │\\n'\n"
                  "│ o-1 │ done │\n"
                  "$ cd /tmp/walk\n"
                  "$ pwd\n"
                  "/tmp/walk\n")


def test_a_changed_word_fails(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="the page shows\nqueued\nthe run printed\nsent"):
        run(tmp_path, "$ echo sent\nqueued\n")


def test_an_id_shown_twice_must_be_the_same_id(tmp_path: Path) -> None:
    first, second = "170b73a0-251e-47e3-8e4b-c6222dfacc6b", "ee1f5043-1134-433f-8d8f-8b864d9bd884"
    page = f"$ echo {first}\n{first}\n$ echo {{id}}\n{first}\n"
    run(tmp_path, page.replace("{id}", first))
    with pytest.raises(AssertionError, match="<id1>\nthe run printed\n<id2>"):
        run(tmp_path, page.replace("{id}", second))


def test_exit_codes_are_checked(tmp_path: Path) -> None:
    run(tmp_path, "$ bash -c 'exit 3'\n$ echo $?\n3\n")
    with pytest.raises(AssertionError, match="exited 2"):
        run(tmp_path, "$ bash -c 'exit 2'\n$ echo $?\n3\n")
    with pytest.raises(AssertionError, match="exit 1 before"):
        run(tmp_path, "$ false\n$ echo next\nnext\n")
