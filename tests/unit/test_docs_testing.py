"""docs/testing.md's code: its Python blocks (marked `<!-- run: testing-page -->`), in order, are one test module,
and each of its `test_*` functions runs here. A block keeps its line numbers in docs/testing.md, so a traceback points
at the page."""

from __future__ import annotations

import inspect
import re
import types
from pathlib import Path
from typing import Any

import pytest

from tests.docs.blocks import doc_blocks

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def page_module() -> types.ModuleType:
    text = PAGE.read_text()
    lines = [""] * text.count("\n")
    blocks = doc_blocks("testing-page")
    assert len(blocks) == len(FENCE.findall(text)), "every Python block of docs/testing.md is a part of the module"
    for block in blocks:
        for offset, line in enumerate(block.text.splitlines()):
            lines[block.line + offset] = line
    module = types.ModuleType("docs_testing")
    exec(compile("\n".join(lines), str(PAGE), "exec"), module.__dict__)  # the page's own code
    return module


MODULE = page_module()
TESTS = sorted(name for name, value in vars(MODULE).items()
               if name.startswith("test_") and inspect.iscoroutinefunction(value))


def test_the_page_has_runnable_examples_of_each_part() -> None:
    assert len(FENCE.findall(PAGE.read_text())) >= 8
    assert {"test_sends_are_processed", "test_a_day_passes_in_milliseconds", "test_a_person_replies",
            "test_the_timer_wins_against_a_running_step",
            "test_a_question_open_across_a_deploy_is_answered_once", "test_never_more_than_three_mails_at_once"
            } <= set(TESTS)


@pytest.mark.parametrize("name", TESTS)
async def test_the_page(name: str) -> None:
    test: Any = getattr(MODULE, name)
    await test()
