"""The docs' console transcripts run as written against a real `dormant dev`, each command's output compared with
the page's (tests/docs/transcript.py says what is normalized): docs/operations.md's walkthrough (the shop, then its
next release over the same data) and its search, docs/dev-stack.md's fired timer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT, doc_blocks
from tests.docs.transcript import Session

pytestmark = pytest.mark.tier2  # four dev-stack starts, reads retried until the worker got there: 1-3 minutes


def test_the_operations_walkthrough_prints_what_the_page_shows(tmp_path: Path) -> None:
    walk = tmp_path / "walk"  # the page's /tmp/walk: a copy of docs/operations
    shutil.copytree(ROOT / "docs" / "operations", walk)
    session = Session(walk)
    try:
        for block in doc_blocks("operations-walkthrough"):
            session.run(block)
        # The page's export line is on stderr: with --out, stdout carries nothing; without, only the export.
        written = session.shell("dormant history export order o-4 --out again.jsonl")
        assert written.returncode == 0 and written.stdout == "", written
        assert written.stderr.startswith("wrote the history of order o-4 (4 entries) to again.jsonl; "), written
        piped = session.shell("dormant history export order o-4")
        assert piped.returncode == 0 and piped.stderr == "" and piped.stdout == (walk / "h.jsonl").read_text()
    finally:
        session.stop()
    exported = [json.loads(line) for line in (walk / "h.jsonl").read_text(encoding="utf-8").splitlines()]
    assert exported[0]["type"] == "actor" and sum(line["type"] == "entry" for line in exported) == 4
    assert not (walk / "payments.down").exists()


def test_the_search_transcript_prints_what_the_page_shows(tmp_path: Path) -> None:
    """"Search attributes": `examples.order_search` (importable from the checkout, as from the page's terminal)."""
    session = Session(tmp_path / "walk")
    session.workdir.mkdir()
    try:
        (block,) = doc_blocks("operations-search")
        session.run(block)
    finally:
        session.stop()


def test_the_dev_stack_s_fire_timer_prints_what_the_page_shows(tmp_path: Path) -> None:
    """docs/dev-stack.md, "Time": an auction's 24 h deadline fired now."""
    session = Session(tmp_path / "walk")
    session.workdir.mkdir()
    try:
        (block,) = doc_blocks("dev-stack-fire-timer")
        session.run(block)
    finally:
        session.stop()
