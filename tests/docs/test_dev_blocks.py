"""Shell blocks of README.md and docs/ run against a real `dormant dev` (tests/docs/shell.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.docs.blocks import doc_blocks
from tests.docs.shell import run_session


def test_the_readme_s_local_run(tmp_path: Path) -> None:
    """Start, send, read the state the page shows, export the history and replay it offline against the code."""
    (block,) = doc_blocks("readme-dev")
    ran = run_session(block, tmp_path)
    assert [r.command.split()[0] for r in ran] == ["curl", "curl", ".venv/bin/dormant", ".venv/bin/dormant"]
    exported = [json.loads(line) for line in (tmp_path / "h.jsonl").read_text().splitlines()]
    assert exported and json.loads(ran[0].stdout)["status"] == "queued"
    assert "history replays cleanly" in ran[-1].stdout, ran[-1].stdout
