"""The package layout keeps its promises (docs/architecture.md): imports point inward, no cycles, small modules."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "lib"
MAX_LINES = 450

# package -> the dormant packages/modules it may import (besides itself and the top-level public modules)
CORE_TOP = {"dormant.actor", "dormant.client", "dormant.errors", "dormant.models", "dormant.ports",
            "dormant.settings", "dormant.testing", "dormant.memory", "dormant.limits", "dormant.safetext", "dormant",
            "dormant.flow", "dormant.memory_slots", "dormant.search", "dormant.searchplan", "dormant.slot_types",
            "dormant.memory_transport", "dormant.callback_records", "dormant.cursors"}
INWARD = {
    "dormant.workflow": set(),
    "dormant.runtime": {"dormant.workflow"},
    "dormant.aws": {"dormant.workflow", "dormant.runtime"},
    "dormant.http": {"dormant.workflow", "dormant.runtime", "dormant.aws"},
    "dormant.dev": {"dormant.workflow", "dormant.runtime", "dormant.aws", "dormant.http"},
    "dormant.cli": {"dormant.workflow", "dormant.runtime", "dormant.aws", "dormant.http", "dormant.dev"},
}
# top-level modules may only use the engine, the runtime and each other (never an adapter or surface)
TOP_ALLOWED = {"dormant.workflow", "dormant.runtime"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in LIB.rglob("*.py"):
        name = ".".join(path.relative_to(LIB).with_suffix("").parts).removesuffix(".__init__")
        found[name] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """dormant modules imported at run time (imports under `if TYPE_CHECKING:` excluded)."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(child) for child in ast.walk(node))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                out.add(candidate if candidate in MODULES else node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {name for name in out if name in MODULES}


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    candidate = ".".join(parts[:2])
    return candidate if candidate in INWARD else module


def test_no_import_cycles() -> None:
    cycles = []
    for start in GRAPH:
        stack, seen = list(GRAPH[start]), set()
        while stack:
            current = stack.pop()
            if current == start:
                cycles.append(start)
                break
            if current not in seen:
                seen.add(current)
                stack.extend(GRAPH[current])
    assert not cycles, f"modules in import cycles: {sorted(cycles)}"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_inward(module: str) -> None:
    own = _package(module)
    allowed = INWARD.get(own, TOP_ALLOWED)
    for target in GRAPH[module]:
        target_package = _package(target)
        if target_package == own or target in CORE_TOP:
            continue
        assert target_package in allowed, f"{module} imports {target}: that arrow points outward"


def test_the_engine_imports_no_io_library() -> None:
    forbidden = ("boto3", "botocore", "aiobotocore", "fastapi", "httpx", "starlette", "uvicorn")
    for name, path in MODULES.items():
        if not name.startswith("dormant.workflow"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            roots = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for root in roots:
                assert not root.startswith(forbidden), f"{name} imports {root}"
                assert not root.startswith("dormant.") or root.startswith("dormant.workflow"), \
                    f"{name} imports {root}: the engine depends on nothing outside workflow/"


def test_modules_stay_small() -> None:
    big = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them by responsibility): {big}"


def test_no_prefix_named_module_families() -> None:
    families: dict[tuple[Path, str], list[str]] = collections.defaultdict(list)
    for path in MODULES.values():
        if "_" in path.stem and not path.stem.startswith("_"):
            families[(path.parent, path.stem.split("_")[0])].append(path.stem)
    disguised = {f"{folder.name}/{prefix}_*": names for (folder, prefix), names in families.items()
                 if len(names) >= 3}
    assert not disguised, f"prefix-named families (a package in disguise): {disguised}"
