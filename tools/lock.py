"""What uv.lock pins, for the installs that do not go through `uv sync` (stdlib only: it runs on any Python >= 3.11).

    python tools/lock.py pins NAME...                  NAME==VERSION for each name (the lowest job's test tools)
    python tools/lock.py runtime [--exclude NAME...]   the library's dependencies at their locked versions (the layer)
    python tools/lock.py constraints                   every locked package as NAME==VERSION (pip -c: the layer's
                                                       transitive dependencies at the locked versions too)

A package locked at two versions (uv forks the resolution by Python version) is written once per version with the
markers uv recorded for it, so pip picks the one of the Python it installs for.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked(lock: Path = ROOT / "uv.lock") -> dict[str, list[tuple[str, str]]]:
    """Each locked package (normalized name) -> [(version, markers)], markers "" where it is locked once."""
    data = tomllib.loads(lock.read_text(encoding="utf-8"))
    project = normalize(tomllib.loads((lock.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"])
    found: dict[str, list[tuple[str, str]]] = {}
    for package in data["package"]:
        name = normalize(package["name"])
        if name == project:
            continue
        markers = " or ".join(f"({m})" for m in package.get("resolution-markers", []))
        found.setdefault(name, []).append((package["version"], markers))
    return {name: [(v, m if len(entries) > 1 else "") for v, m in entries] for name, entries in found.items()}


def requirement_lines(name: str, entries: list[tuple[str, str]], extras: str = "") -> list[str]:
    return [f"{name}{extras}=={version}" + (f" ; {markers}" if markers else "") for version, markers in entries]


def dependency_names(pyproject: Path = ROOT / "pyproject.toml") -> list[tuple[str, str]]:
    """(normalized name, "[extras]" or "") of each of the library's own dependencies."""
    names = []
    for requirement in tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?", requirement)
        assert match, requirement
        names.append((normalize(match[1]), match[2] or ""))
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    pins = commands.add_parser("pins")
    pins.add_argument("names", nargs="+")
    runtime = commands.add_parser("runtime")
    runtime.add_argument("--exclude", nargs="*", default=[])
    commands.add_parser("constraints")
    args = parser.parse_args(argv)
    lock = locked()
    lines: list[str] = []
    if args.command == "pins":
        for name in args.names:
            if normalize(name) not in lock:
                print(f"lock.py: {name} is not in uv.lock", file=sys.stderr)
                return 1
            lines += requirement_lines(normalize(name), lock[normalize(name)])
    elif args.command == "runtime":
        excluded = {normalize(n) for n in " ".join(args.exclude).split()}
        for name, extras in dependency_names():
            if name not in excluded:
                lines += requirement_lines(name, lock[name], extras)
    else:
        for name in sorted(lock):
            lines += requirement_lines(name, lock[name])
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
