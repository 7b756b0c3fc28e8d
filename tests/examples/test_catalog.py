"""Every pattern of the RivetKit workflow docs has an example module with a registry and a test."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from dormant.actor import Registry
from examples.catalog import MORE_PATTERNS, PATTERNS

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT.parent / "shared" / "reference" / "rivetkit-workflows.md"


def test_the_catalog_covers_the_28_patterns() -> None:
    assert len(PATTERNS) == 28
    assert len(set(PATTERNS.values())) == 28  # one module per pattern


@pytest.mark.skipif(not REFERENCE.exists(), reason="the shared reference docs are not beside this checkout")
def test_every_pattern_heading_of_the_reference_is_in_the_catalog() -> None:
    text = REFERENCE.read_text()
    start = text.index("### Simple workflow")
    headings = re.findall(r"^### (.+)$", text[start:text.index("## Migrations")], re.MULTILINE)
    named = {title.split(" (")[0] for title in PATTERNS}
    missing = [h for h in headings if h.split(" (")[0] not in named]
    assert missing == []


@pytest.mark.parametrize("module_name", sorted(set(PATTERNS.values()) | set(MORE_PATTERNS.values())))
def test_each_example_has_a_registry_and_a_test(module_name: str) -> None:
    module = importlib.import_module(f"examples.{module_name}")
    assert isinstance(module.registry, Registry) and module.registry.actors
    assert module.__doc__ and len(module.__doc__.split()) > 10
    test_file = ROOT / "tests" / "examples" / f"test_{module_name}.py"
    assert test_file.exists(), f"{module_name} has no test"
    assert re.search(r"^async def test_|^def test_", test_file.read_text(), re.MULTILINE)
