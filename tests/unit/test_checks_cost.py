"""benchmarks/checks_cost.py keeps up with the code it takes the checks out of (docs/performance.md, issue 28)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Loaded from its file: benchmarks/ on sys.path would shadow the `functions` package with benchmarks/functions.py
_spec = importlib.util.spec_from_file_location("checks_cost", ROOT / "benchmarks" / "checks_cost.py")
assert _spec is not None and _spec.loader is not None
checks_cost = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checks_cost)


@pytest.mark.parametrize("step", sorted(checks_cost.STEPS))
def test_each_copy_is_made_from_this_tree(tmp_path: Path, step: str) -> None:
    copy = checks_cost.make_copy(ROOT / "lib", tmp_path / step, checks_cost.STEPS[step])
    for relative, old, new in checks_cost.STEPS[step]:
        text = (copy / "dormant" / relative).read_text()
        assert new in text
        assert (old in text) == (old in new)


def test_a_text_not_found_stops_it(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="not there once"):
        checks_cost.make_copy(ROOT / "lib", tmp_path / "x", [("workflow/execution.py", "no such text\n", "")])
