"""Every shell and Python block in README.md and docs/ is run by a test or says why not (tests/docs/blocks.py)."""

from __future__ import annotations

import ast
import re
import textwrap

from tests.docs.blocks import CHECKED, ROOT, all_blocks

CLAIM = re.compile(r"""doc_blocks\(\s*["']([^"']+)["']\s*\)""")


def claimed() -> dict[str, list[str]]:
    """ID -> the test modules that call doc_blocks("ID")."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.parent == ROOT / "tests" / "docs" and path.name in ("blocks.py", "test_blocks.py"):
            continue  # (they name the call, they do not make it)
        for name in CLAIM.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_block_is_run_or_says_why_not() -> None:
    unmarked = [block.where for block in all_blocks() if block.lang in CHECKED and not (block.run or block.not_run)]
    assert unmarked == [], ("blocks with no <!-- run: ID --> or <!-- not-run: REASON --> on the line before the "
                            f"fence: {unmarked}")


def test_every_run_marker_names_a_test_that_runs_it() -> None:
    tests = claimed()
    orphans = sorted({f"{block.where} ({block.run})" for block in all_blocks() if block.run and block.run not in tests})
    assert orphans == [], f"marked run, but no test calls doc_blocks() with their ID: {orphans}"


def test_every_claimed_block_is_on_a_page() -> None:
    marked = {block.run for block in all_blocks()}
    missing = {name: where for name, where in claimed().items() if name not in marked}
    assert missing == {}, f"tests claim blocks that no page marks: {missing}"


def test_a_reason_is_a_sentence() -> None:
    short = [block.where for block in all_blocks() if block.not_run is not None and len(block.not_run.split()) < 3]
    assert short == [], f"a not-run reason a reader can act on, please: {short}"


def test_every_python_block_parses() -> None:
    """Fragments too: a reader copies them."""
    broken = []
    for block in all_blocks():
        if block.lang == "python":
            try:
                ast.parse(textwrap.dedent(block.text), block.where)
            except SyntaxError as error:
                broken.append(f"{block.where}: {error}")
    assert broken == []
