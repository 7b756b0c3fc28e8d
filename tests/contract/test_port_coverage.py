"""Every method of the EventStore port has a contract test here (a test of tests/contract that calls it, directly or
through a helper of the suite), and both backends implement it: a new port method fails this until it gets one."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from dormant.dynamodb.store import DynamoEventStore
from dormant.memory.store import MemoryEventStore
from dormant.ports import EventStore

SUITE = Path(__file__).parent


def port_methods() -> set[str]:
    """The EventStore Protocol's methods (those of the capability Protocols it combines included)."""
    return {name for name, value in inspect.getmembers(EventStore, callable) if not name.startswith("_")}


def _functions(tree: ast.Module) -> dict[str, ast.AST]:
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def _uses(node: ast.AST) -> tuple[set[str], set[str]]:
    """(attribute names a function reads: `store.load(...)`, `store.check_message` passed on; names it calls)."""
    attributes = {child.attr for child in ast.walk(node) if isinstance(child, ast.Attribute)}
    called = {child.func.id for child in ast.walk(node) if isinstance(child, ast.Call)
              and isinstance(child.func, ast.Name)}
    return attributes, called


def methods_under_test() -> dict[str, list[str]]:
    """Port method -> the contract tests that call it (through the suite's helpers too)."""
    modules = {path: ast.parse(path.read_text()) for path in sorted(SUITE.glob("*.py"))
               if path.name not in ("conftest.py", Path(__file__).name)}
    helpers: dict[str, ast.AST] = {}
    for tree in modules.values():
        helpers.update({name: node for name, node in _functions(tree).items() if not name.startswith("test_")})
    methods = port_methods()
    found: dict[str, list[str]] = {}
    for path, tree in modules.items():
        for name, node in _functions(tree).items():
            if not name.startswith("test_"):
                continue
            attributes, pending = _uses(node)
            seen: set[str] = set()
            while pending:  # through the helpers it calls, and theirs
                helper = pending.pop()
                if helper in helpers and helper not in seen:
                    seen.add(helper)
                    more_attributes, more_calls = _uses(helpers[helper])
                    attributes |= more_attributes
                    pending |= more_calls
            for method in attributes & methods:
                found.setdefault(method, []).append(f"{path.stem}::{name}")
    return found


def test_every_port_method_has_a_contract_test() -> None:
    methods = port_methods()
    assert len(methods) >= 34 and {"create", "commit", "enqueue", "acquire_slot", "check_values"} <= methods
    untested = sorted(methods - set(methods_under_test()))
    assert untested == [], f"EventStore methods without a contract test in tests/contract: {untested}"


def test_both_backends_implement_every_port_method() -> None:
    for backend in (MemoryEventStore(), DynamoEventStore(client=None)):  # (no I/O until a method is called)
        missing = sorted(name for name in port_methods() if not callable(getattr(backend, name, None)))
        assert missing == [], f"{type(backend).__name__} lacks {missing}"
