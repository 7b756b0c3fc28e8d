"""The fenced code blocks of README.md and docs/ (docs are code: issue 30), and what each one says about itself.

Every shell block (```sh, ```bash, ```console, ```shell) and Python block carries a marker on the line before its
fence, which a reader of the Markdown sees:

- `<!-- run: ID -->`: a test runs it; the tests that do name the ID in a call `doc_blocks("ID")` (blocks may share
  an ID: a group, run together in page order, e.g. an app module and its test);
- `<!-- not-run: REASON -->`: no test runs it, for the reason given (an AWS account, a placeholder, a run of
  minutes that CI runs by its own command).

tests/docs/test_blocks.py fails for a block with neither, for a run ID no test claims, and for a claimed ID no
page has.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = frozenset({"sh", "bash", "console", "shell", "python"})
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)[^\n]*$")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>run|not-run):\s*(?P<value>.*?)\s*-->\s*$")


@dataclass(frozen=True, slots=True)
class Block:
    page: str  # relative to the repository root
    line: int  # the opening fence's line (1-based)
    lang: str
    text: str  # the body, its fence's indentation removed
    run: str | None  # the ID of `<!-- run: ID -->`
    not_run: str | None  # the reason of `<!-- not-run: REASON -->`

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def page_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent = len(opening["indent"])
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith("```"):
            end += 1
        body = "\n".join(line[indent:] if not line[:indent].strip() else line.lstrip()
                         for line in lines[index + 1:end])
        marker = MARKER.match(lines[index - 1]) if index > 0 else None
        kind, value = (marker["kind"], marker["value"]) if marker else (None, None)
        found.append(Block(str(path.relative_to(ROOT)), index + 1, opening["lang"], body + "\n" if body else "",
                           value if kind == "run" else None, value if kind == "not-run" else None))
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in pages() for block in page_blocks(path)]


def doc_blocks(name: str) -> list[Block]:
    """The blocks marked `<!-- run: NAME -->`, in page order; fails when there are none (the doc moved on)."""
    found = [block for block in all_blocks() if block.run == name]
    assert found, f"no block in README.md or docs/ is marked <!-- run: {name} -->"
    return found


def commands(block: Block) -> list[str]:
    """A shell block's commands: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", block.text)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


async def run_python(blocks: list[Block], namespace: dict[str, object] | None = None) -> dict[str, object]:
    """Runs Python blocks in order in one namespace, as a reader pastes them into `python -m asyncio` (top-level
    `await` and `async with` allowed); each keeps its line numbers in its page, so a traceback points at the page."""
    scope: dict[str, object] = namespace if namespace is not None else {"__name__": "docs_block"}
    for block in blocks:
        source = "\n" * block.line + textwrap.dedent(block.text)
        code = compile(source, str(ROOT / block.page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, scope)  # the page's own code
        if inspect.iscoroutine(result):
            await result
    return scope
