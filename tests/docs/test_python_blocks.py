"""The Python blocks of README.md that a reader runs as they are (docs/testing.md's run in
tests/unit/test_docs_testing.py)."""

from __future__ import annotations

from tests.docs.blocks import doc_blocks, run_python


async def test_the_readme_counter_runs_and_its_test_passes() -> None:
    """The counter actor and the TestEnv lines after it (their own `assert` is the check)."""
    blocks = doc_blocks("readme-counter")
    assert [block.lang for block in blocks] == ["python", "python"]
    scope = await run_python(blocks)
    assert "registry" in scope and "env" in scope  # both blocks ran to their end
