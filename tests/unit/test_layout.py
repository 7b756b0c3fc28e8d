"""The package layout keeps its promises (docs/architecture.md): the top level holds only the public API, arrows point
inward, no import cycle (imports made only for type checking count too), and no module uses another module's private
names. Read from the source (ast): nothing is imported."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "lib"

# The public API: what users import. Everything else lives in a package named for its job.
PUBLIC = {"dormant", "dormant.actor", "dormant.client", "dormant.errors", "dormant.models", "dormant.settings",
          "dormant.testing"}
# package -> the packages (and public modules) it may import, besides itself. The engine (workflow) imports nothing;
# core and ports know only the engine; the runtime knows the ports, never a backend; backends implement the ports;
# aws composes backends for Lambda; the surfaces (http, cli, dev) sit on top.
ERRORS = {"dormant.errors", "dormant.models"}
LAYERS: dict[str, set[str]] = {
    "dormant.workflow": set(),
    "dormant.errors": {"dormant.workflow"},
    "dormant.models": {"dormant.workflow"},
    "dormant.core": {"dormant.workflow", *ERRORS},
    "dormant.settings": {"dormant.core", *ERRORS},
    "dormant.ports": {"dormant.workflow", "dormant.core", *ERRORS},
    "dormant.actor": {"dormant.workflow", "dormant.core", "dormant.ports", "dormant.runtime", *ERRORS},
    "dormant.runtime": {"dormant.workflow", "dormant.core", "dormant.ports", "dormant.actor", "dormant.settings",
                        "dormant.client", *ERRORS},
    "dormant.client": {"dormant.workflow", "dormant.core", "dormant.ports", "dormant.runtime", "dormant.actor",
                       *ERRORS},
    "dormant.memory": {"dormant.workflow", "dormant.core", "dormant.ports", "dormant.runtime", *ERRORS},
    "dormant.testing": {"dormant.workflow", "dormant.core", "dormant.ports", "dormant.runtime", "dormant.actor",
                        "dormant.client", "dormant.memory", *ERRORS},
    "dormant.s3": {"dormant.workflow", "dormant.core", "dormant.ports", "dormant.settings", *ERRORS},
    "dormant.dynamodb": {"dormant.workflow", "dormant.core", "dormant.ports", "dormant.runtime", "dormant.settings",
                         "dormant.s3", *ERRORS},
    "dormant.sqs": {"dormant.workflow", "dormant.core", "dormant.ports", "dormant.runtime", "dormant.settings",
                    *ERRORS},
    "dormant.aws": {"dormant.workflow", "dormant.core", "dormant.ports", "dormant.runtime", "dormant.settings",
                    "dormant.actor", "dormant.client", "dormant.dynamodb", "dormant.s3", "dormant.sqs", *ERRORS},
    "dormant.http": {"dormant.workflow", "dormant.core", "dormant.ports", "dormant.runtime", "dormant.settings",
                     "dormant.actor", "dormant.client", "dormant.aws", "dormant.dynamodb", "dormant.sqs", *ERRORS},
    "dormant.dev": {"dormant.workflow", "dormant.core", "dormant.ports", "dormant.runtime", "dormant.settings",
                    "dormant.actor", "dormant.client", "dormant.aws", "dormant.dynamodb", "dormant.s3", "dormant.sqs",
                    "dormant.http", "dormant.memory", *ERRORS},
    # a user's project and its deployment (`dormant new`, `dormant package`); its files/ are the Lambda entry points
    # (functions/), which compose aws and http as the functions do
    "dormant.deploy": {"dormant.workflow", "dormant.actor", "dormant.settings", "dormant.aws", "dormant.http",
                       *ERRORS},
    "dormant.cli": {"dormant.workflow", "dormant.core", "dormant.ports", "dormant.runtime", "dormant.settings",
                    "dormant.actor", "dormant.client", "dormant.aws", "dormant.dynamodb", "dormant.http",
                    "dormant.dev", "dormant.memory", "dormant.deploy", *ERRORS},
    "dormant": {"dormant.workflow", "dormant.core", "dormant.runtime", "dormant.actor", "dormant.client", *ERRORS},
}
# What this layout still owes (issue 27 pays it off): it may only shrink, and must be empty when issue 27 is done.
# (module, private name of another module it uses)
KNOWN_DEBT: set[tuple[str, str]] = set()
# (module, what it imports against the layers)
KNOWN_OUTWARD: set[tuple[str, str]] = set()
KNOWN_CYCLES: list[list[str]] = []


def _modules() -> dict[str, Path]:
    found = {}
    for path in LIB.rglob("*.py"):
        name = ".".join(path.relative_to(LIB).with_suffix("").parts).removesuffix(".__init__")
        found[name] = path
    return found


MODULES = _modules()
TREES = {name: ast.parse(path.read_text()) for name, path in MODULES.items()}


def _imports(name: str) -> set[str]:
    """dormant modules `name` imports, at run time or only for type checking (a cycle is a cycle either way)."""
    out: set[str] = set()
    for node in ast.walk(TREES[name]):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                out.add(candidate if candidate in MODULES else node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {module for module in out if module in MODULES and module != name}


GRAPH = {name: _imports(name) for name in MODULES}


def _layer(module: str) -> str:
    if module in LAYERS:
        return module
    parts = module.split(".")
    return ".".join(parts[:2])


def _cycles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(GRAPH[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return found


def test_the_top_level_holds_only_the_public_api() -> None:
    top = {name for name in MODULES if name.count(".") == 1 and MODULES[name].name != "__init__.py"}
    assert top <= PUBLIC, f"top-level modules that are not public API (put them in a package): {sorted(top - PUBLIC)}"


def test_no_import_cycles_type_checking_included() -> None:
    cycles = [cycle for cycle in _cycles() if not any(set(cycle) <= set(known) for known in KNOWN_CYCLES)]
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_inward(module: str) -> None:
    own = _layer(module)
    assert own in LAYERS, f"{module} is in no layer: add its package to LAYERS"
    outward = sorted(target for target in GRAPH[module] if _layer(target) != own
                     and _layer(target) not in LAYERS[own] and (module, target) not in KNOWN_OUTWARD)
    assert not outward, f"{module} imports {outward}: those arrows point outward"


def _private_definitions(tree: ast.Module) -> set[str]:
    """Private names a module defines as members: its functions, classes, methods, module and class variables, and
    attributes it assigns (`self._x = ...`, or a marker it sets on another library's class). Not locals."""
    names: set[str] = set()

    def targets(node: ast.AST) -> list[ast.AST]:
        if isinstance(node, ast.Assign):
            return list(node.targets)
        if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            return [node.target]
        return []

    def scan(body: list[ast.stmt], *, members: bool) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if members:
                    names.add(node.name)
                scan(node.body, members=isinstance(node, ast.ClassDef))
            for target in targets(node):
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute):
                        names.add(part.attr)
                    elif isinstance(part, ast.Name) and members:
                        names.add(part.id)
            for child in ast.iter_child_nodes(node):  # attribute assignments inside ifs, loops, methods
                if isinstance(child, ast.stmt) and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                          ast.ClassDef)):
                    scan([child], members=False)
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                     ast.ClassDef)):
                    scan([item for item in inner if isinstance(item, ast.stmt)], members=members)

    scan(tree.body, members=True)
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


DEFINED = {name: _private_definitions(tree) for name, tree in TREES.items()}
OURS = set().union(*DEFINED.values())


def _private_uses(name: str) -> set[str]:
    """Private names of other dormant modules that `name` uses: `from x import _y`, and `obj._y` where `_y` is a
    private name some other dormant module defines and this one does not (another class's private attribute;
    `sys._getframe` or a private attribute of another library is not ours to police here)."""
    tree = TREES[name]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dormant"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in OURS and node.attr not in DEFINED[name]:
            found.add(f"{ast.unparse(node.value)}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names() -> None:
    uses = {(name, used) for name in MODULES for used in _private_uses(name)}
    new = sorted(uses - KNOWN_DEBT)
    assert not new, "private names used from outside: " + "; ".join(f"{m}: {u}" for m, u in new)
    paid = sorted(KNOWN_DEBT - uses)
    assert not paid, f"debt paid: take these out of KNOWN_DEBT: {paid}"


def test_the_engine_imports_no_io_library() -> None:
    forbidden = ("boto3", "botocore", "aiobotocore", "fastapi", "httpx", "starlette", "uvicorn", "socket",
                 "asyncio.subprocess", "subprocess", "urllib.request")
    for name, tree in TREES.items():
        if not name.startswith("dormant.workflow"):
            continue
        for node in ast.walk(tree):
            roots = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for root in roots:
                assert not root.startswith(forbidden), f"{name} imports {root}"
                assert not root.startswith("dormant.") or root.startswith("dormant.workflow"), \
                    f"{name} imports {root}: the engine depends on nothing outside workflow/"


def test_no_prefix_named_module_families() -> None:
    families: dict[tuple[Path, str], list[str]] = collections.defaultdict(list)
    for path in MODULES.values():
        if "_" in path.stem and not path.stem.startswith("_"):
            families[(path.parent, path.stem.split("_")[0])].append(path.stem)
    disguised = {f"{folder.name}/{prefix}_*": names for (folder, prefix), names in families.items()
                 if len(names) >= 3}
    assert not disguised, f"prefix-named families (a package in disguise): {disguised}"
