"""`dormant package --app MODULE:REGISTRY --out DIR`: the deployment of your app (dormant.deploy.package): a SAM
template, a Terraform module, the functions' bundle and the dependency layer for Lambda's Python 3.13 on arm64."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dormant.cli.common import guarded, out
from dormant.deploy import package as packaging


def register(app: typer.Typer) -> None:
    app.command("package")(package)


def package(app: Annotated[str, typer.Option(
                "--app", show_default=False, help="Your registry as module:attribute, e.g. shop.app:registry")],
            out_dir: Annotated[Path, typer.Option(
                "--out", help="The folder to write (replaced when an earlier `dormant package` wrote it)")],
            project: Annotated[Path, typer.Option(
                help="Your project's folder: its package and its pyproject.toml dependencies")] = Path(),
            bytecode: Annotated[bool, typer.Option(
                help="Compile the bytecode Lambda loads, with a python3.13 found on PATH")] = True) -> None:
    """Write the deployment of your app: template.yaml (SAM), terraform/, the code and its layer."""
    requirements = guarded(lambda: packaging.package(app, out_dir, project, bytecode=bytecode))
    out.print(f"wrote {out_dir}/: template.yaml (sam build --template-file {out_dir}/template.yaml), terraform/ "
              f"(terraform init && terraform apply), bundle/, layer/ ({len(requirements)} requirements)",
              markup=False, highlight=False)
