"""pyproject.toml declares ranges; uv.lock, which the repository's installs take (`uv sync --locked`), was made from
exactly those ranges and fits them. Offline and fast: a stale lock fails here before `make test` refuses it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tools import lock

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
LOCK = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))


def declared() -> list[tuple[Requirement, str]]:
    """Every requirement of pyproject.toml with its extra ("" for the library's own)."""
    found = [(Requirement(r), "") for r in PROJECT["dependencies"]]
    for extra, requirements in PROJECT["optional-dependencies"].items():
        found += [(Requirement(r), extra) for r in requirements]
    return found


def test_the_library_declares_ranges_not_pins() -> None:
    pinned = [str(r) for r, _ in declared() if any(s.operator in ("==", "===") for s in r.specifier)]
    assert not pinned, pinned
    runtime = {r.name: r.specifier for r, extra in declared() if not extra}
    assert all(any(s.operator == ">=" for s in spec) for spec in runtime.values()), runtime  # a tested lower bound
    assert "<3" in str(runtime["pydantic"])  # a major version that breaks: the one upper bound that must stay


def test_the_lock_was_made_from_pyproject_as_it_is() -> None:
    (project,) = [p for p in LOCK["package"] if p["name"] == PROJECT["name"]]
    in_lock = sorted((lock.normalize(r["name"]), tuple(sorted(r.get("extras", []))), str(SpecifierSet(r["specifier"])),
                      r.get("marker", "")) for r in project["metadata"]["requires-dist"])
    in_pyproject = sorted((lock.normalize(r.name), tuple(sorted(r.extras)), str(r.specifier),
                           f"extra == '{extra}'" if extra else "") for r, extra in declared())
    assert in_lock == in_pyproject  # if not: `make lock` (docs/testing.md, "Dependencies and the lock")
    assert sorted(project["metadata"]["provides-extras"]) == sorted(PROJECT["optional-dependencies"])
    assert LOCK["requires-python"] == PROJECT["requires-python"]


def test_every_locked_version_fits_its_range_and_has_hashes() -> None:
    locked = lock.locked()
    for requirement, extra in declared():
        for version, _ in locked[lock.normalize(requirement.name)]:
            assert requirement.specifier.contains(version, prereleases=True), (str(requirement), extra, version)
    unhashed = [p["name"] for p in LOCK["package"] if "source" in p and "registry" in p["source"]
                and not all("hash" in f for f in p.get("wheels", []) + ([p["sdist"]] if "sdist" in p else []))]
    assert not unhashed, unhashed
    registries = {p["source"]["registry"] for p in LOCK["package"] if "registry" in p.get("source", {})}
    assert registries == {"https://pypi.org/simple"}  # a fresh machine reaches it


def test_the_layer_s_requirements_are_the_library_s_at_the_locked_versions(capsys: object) -> None:
    assert lock.main(["runtime", "--exclude", "uvicorn httpx"]) == 0
    lines = capsys.readouterr().out.split()  # type: ignore[attr-defined]
    names = [name for name, _ in lock.dependency_names()]
    assert [line.split("==")[0] for line in lines] == [n for n in names if n not in ("uvicorn", "httpx")]
    assert all(line.split("==")[1] == lock.locked()[line.split("==")[0]][0][0] for line in lines)
