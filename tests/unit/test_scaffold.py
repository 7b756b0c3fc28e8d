"""`dormant new NAME` (dormant.deploy.scaffold): the project it writes passes its own tests at once, declares Dormant
as a range, and a bad name or a folder holding something is refused by name, exit code 2, nothing written."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dormant.cli.main import app
from dormant.deploy import scaffold
from dormant.deploy.errors import InvalidProjectNameError, ProjectExistsError


@pytest.fixture
def on_path(tmp_path: Path) -> Iterator[Path]:
    """tmp_path/<project> importable for one test (and forgotten after it)."""
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if not p.startswith(str(tmp_path))]


async def test_the_project_s_own_tests_pass_at_once(on_path: Path) -> None:
    root = scaffold.create("shop_tests", on_path)
    sys.path.insert(0, str(root))
    tests = _load(root / "tests" / "test_app.py")
    cases = [fn for name, fn in inspect.getmembers(tests, inspect.iscoroutinefunction) if name.startswith("test_")]
    assert len(cases) == 3
    for case in cases:
        await case()


def _load(path: Path) -> object:
    spec = importlib.util.spec_from_file_location(f"scaffolded_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_scaffolded_tests_can_fail(on_path: Path) -> None:
    """The generated tests check the workflow: an order that ships at once breaks them."""
    root = scaffold.create("shop_broken", on_path)
    app_py = root / "shop_broken" / "app.py"
    app_py.write_text(app_py.read_text().replace('await ctx.sleep("cooling-off", COOLING_OFF_SECONDS)', ""))
    sys.path.insert(0, str(root))
    tests = _load(root / "tests" / "test_app.py")
    with pytest.raises(AssertionError):
        await tests.test_an_order_ships_after_its_payment_and_the_cooling_off()  # type: ignore[attr-defined]


def test_the_project_s_files(tmp_path: Path) -> None:
    root = scaffold.create("shop", tmp_path)
    written = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert written == [".gitignore", "Makefile", "README.md", "pyproject.toml", "shop/__init__.py", "shop/app.py",
                       "tests/test_app.py"]
    project = tomllib.loads((root / "pyproject.toml").read_text())
    (dependency,) = project["project"]["dependencies"]
    assert dependency.startswith("dormant>=") and ",<" in dependency  # a range, not a pin
    assert project["tool"]["pytest"]["ini_options"]["asyncio_mode"] == "auto"
    makefile = (root / "Makefile").read_text()
    for target in ("test:", "dev:", "package:", "deploy:"):
        assert f"\n{target}" in makefile
    assert "dormant package --app $(APP) --out build" in makefile and "APP := shop.app:registry" in makefile


@pytest.mark.parametrize("version, expected", [("0.1.0", "dormant>=0.1.0,<0.2"), ("0.9.3", "dormant>=0.9.3,<0.10"),
                                               ("1.4.2", "dormant>=1.4.2,<2"), ("2.0.0rc1", "dormant>=2.0.0rc1,<3")])
def test_dormant_is_a_range_up_to_the_next_breaking_version(monkeypatch: pytest.MonkeyPatch, version: str,
                                                            expected: str) -> None:
    monkeypatch.setattr(scaffold, "version", lambda name: version)
    assert scaffold.dormant_range() == expected


@pytest.mark.parametrize("name", ["2shop", "my-shop", "Shop", "class", "json", "dormant", "tests", "functions",
                                  "shöp", "", "a b"])
def test_a_name_that_is_no_package_is_refused_and_nothing_written(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidProjectNameError):
        scaffold.create(name, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_holds_something_is_refused_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "notes.txt").write_text("mine")
    with pytest.raises(ProjectExistsError):
        scaffold.create("shop", tmp_path)
    assert [p.name for p in (tmp_path / "shop").iterdir()] == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    assert scaffold.create("empty", tmp_path) == tmp_path / "empty"  # an empty folder is fine


def test_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    made = runner.invoke(app, ["new", "shop"], env={"COLUMNS": "80"})
    assert made.exit_code == 0 and (tmp_path / "shop" / "shop" / "app.py").is_file(), made.output
    again = runner.invoke(app, ["new", "shop"], env={"COLUMNS": "80"})
    assert again.exit_code == 2 and "ProjectExistsError" in again.stderr and "not empty" in again.stderr
    bad = runner.invoke(app, ["new", "my-shop"], env={"COLUMNS": "80"})
    assert bad.exit_code == 2 and "InvalidProjectNameError" in bad.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shop"]
