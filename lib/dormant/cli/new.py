"""`dormant new NAME`: a project of its own in ./NAME (dormant.deploy.scaffold), its tests passing at once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dormant.cli.common import guarded, out
from dormant.deploy import scaffold


def register(app: typer.Typer) -> None:
    app.command("new")(new)


def new(name: Annotated[str, typer.Argument(help="The project's folder and Python package, e.g. shop")],
        directory: Annotated[Path, typer.Option(help="Where to create the project's folder")] = Path()) -> None:
    """Scaffold a project: one actor, its TestEnv tests, pyproject.toml, a Makefile (test, dev, package, deploy)."""
    root = guarded(lambda: scaffold.create(name, directory))
    out.print(f"created {root}/: {name}/app.py (an actor), tests/, pyproject.toml, Makefile, README.md\n"
              f"next: cd {root} && python3 -m venv .venv && .venv/bin/pip install -e \".[dev,test]\" && make test",
              markup=False, highlight=False)
