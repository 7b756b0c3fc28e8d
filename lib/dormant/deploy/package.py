"""`dormant package`: the deployment of a user's app, written to one folder (as `chalice package` does).

    OUT/template.yaml       the SAM template (`sam build --template-file OUT/template.yaml`, `sam deploy`)
    OUT/Makefile            what `sam build` runs: copies bundle/ and layer/ (BuildMethod: makefile)
    OUT/bundle/             the functions' code: dormant, functions/ (the Lambda entry points), the app's package
    OUT/layer/python/       the dependencies for Lambda's Python 3.13 on arm64 (dormant.deploy.layer)
    OUT/terraform/          the same resources as a Terraform module, its zips in terraform/.build/

The template and the module are Dormant's own (dormant.deploy.render), so the packaged app gets the same queues,
indexes, bucket, alarms, auth modes and least-privilege roles.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from dormant.actor import Registry
from dormant.deploy import layer, render
from dormant.deploy.errors import AppNotFoundError, ProjectExistsError

MARKER = "dormant-package.json"  # what says a folder is a package's output (and may be written over)
LIBRARY = Path(__file__).resolve().parents[1]  # the installed dormant package
EPOCH = (1980, 1, 1, 0, 0, 0)  # zip entries' time: the same files make the same zip (Terraform's source hash)


@dataclass(frozen=True, slots=True)
class AppSource:
    """Where the app's top-level package (or module) is, and the folder it is imported from."""

    path: Path
    root: Path

    @property
    def name(self) -> str:
        return self.path.stem if self.path.is_file() else self.path.name


def find_app(app: str, project: Path) -> AppSource:
    """The top-level package of `app` in the project (./NAME, ./NAME.py or the src/ layout), once its registry
    loads from there."""
    render.check_app(app)
    module, _, attribute = app.partition(":")
    top = module.split(".")[0]
    for root in (project, project / "src"):
        for path in (root / top, root / f"{top}.py"):
            if path.is_dir() or path.is_file():
                load(module, attribute, root)
                return AppSource(path.resolve(), root.resolve())
    raise AppNotFoundError(f"--app {app}: no package {top!r} in {project} (looked for {top}/ and {top}.py, also "
                           "under src/); run `dormant package` in your project's folder or give --project")


def load(module: str, attribute: str, root: Path) -> None:
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        registry = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise AppNotFoundError(f"--app {module}:{attribute} does not load: {type(error).__name__}: {error}") from None
    if not isinstance(registry, Registry):
        raise AppNotFoundError(f"--app {module}:{attribute} is a {type(registry).__name__}, not a dormant Registry "
                               "(make it with setup(...))")


def code_files(source: AppSource) -> dict[str, bytes]:
    """zip path -> content of the functions' bundle: dormant's modules and static files, the Lambda entry points
    and every file of the app's package (no bytecode caches)."""
    library = LIBRARY
    files = {f"dormant/{p.relative_to(library)}": p.read_bytes() for p in library.rglob("*.py")
             if "__pycache__" not in p.parts and p.relative_to(library).parts[:2] != ("deploy", "files")}
    files |= {f"dormant/{p.relative_to(library)}": p.read_bytes()
              for p in (library / "http" / "static").rglob("*") if p.is_file()}
    files |= {name: render.shipped_text(*name.split("/")).encode() for name in render.FUNCTIONS}
    if source.path.is_file():
        files[source.path.name] = source.path.read_bytes()
    else:
        files |= {str(p.relative_to(source.path.parent)): p.read_bytes() for p in source.path.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    return files


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def write_zip(out: Path, root: Path) -> None:
    """Every file under `root`, sorted, with fixed times and modes: the same files make the same zip."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(root).as_posix(), date_time=EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())


def prepare_out(out: Path) -> None:
    """An empty folder, or the output of an earlier `dormant package` (replaced); anything else is refused."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise ProjectExistsError(f"{out} exists and is not the output of `dormant package`: give another --out "
                                 "or remove it")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)


def write_deployment(out: Path, app: str) -> None:
    """The SAM template, its Makefile, the Terraform module and a README (no code: see `package`)."""
    (out / "template.yaml").write_text(render.template_yaml(app), encoding="utf-8")
    (out / "Makefile").write_text(render.SAM_MAKEFILE, encoding="utf-8")
    (out / "README.md").write_text(render.readme(app), encoding="utf-8")
    terraform = out / render.TERRAFORM_DIR
    terraform.mkdir(exist_ok=True)
    for name in render.terraform_names():
        (terraform / name).write_text(render.terraform_file(name, app), encoding="utf-8")


def lambda_python() -> str | None:
    """A python3.13 that runs (Lambda's), to compile the bytecode it will load; None when there is none."""
    found = shutil.which(f"python{layer.LAMBDA_PYTHON}")
    if found is None:
        return None
    probe = subprocess.run([found, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                           text=True, check=False, stdin=subprocess.DEVNULL, env=lambda_python_environment())
    return found if probe.returncode == 0 and probe.stdout.strip() == layer.LAMBDA_PYTHON else None


def lambda_python_environment() -> dict[str, str]:
    # pyenv's shim runs python3.13 only when asked for that version (PYENV_VERSION); harmless without pyenv
    return {**os.environ, "PYENV_VERSION": layer.LAMBDA_PYTHON}


def compile_bytecode(python: str, folder: Path) -> None:
    # unchecked-hash: the runtime never compares the .pyc with its source (no stat of every file at import)
    subprocess.run([python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
                    str(folder)], capture_output=True, check=False, stdin=subprocess.DEVNULL,
                   env=lambda_python_environment())


def dormant_version() -> str:
    try:
        return version("dormant")
    except PackageNotFoundError:
        return "unknown"


def package(app: str, out: Path, project: Path, *, bytecode: bool = True) -> list[str]:
    """Writes the deployment of `app` (the project's registry) to `out`; returns the layer's requirements."""
    source = find_app(app, project)
    requirements = [*layer.dormant_requirements(), *layer.project_requirements(project)]
    prepare_out(out)
    marker = {"app": app, "dormant": dormant_version(), "requirements": requirements, "complete": False}
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")  # first: a failed run is ours
    write_deployment(out, app)
    bundle = out / render.BUNDLE_DIR
    write_tree(bundle, code_files(source))
    layer.build(out / render.LAYER_DIR, requirements)
    python = lambda_python() if bytecode else None
    if python is not None:
        compile_bytecode(python, bundle)
        compile_bytecode(python, out / render.LAYER_DIR)
    zips = out / render.TERRAFORM_DIR / ".build"
    write_zip(zips / "code.zip", bundle)
    write_zip(zips / "layer.zip", out / render.LAYER_DIR)
    marker |= {"bytecode": python is not None, "complete": True}
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    return requirements
