"""`dormant package` (dormant.deploy.package, dormant.deploy.layer) without pip: where the app's package is found, what
the functions' bundle holds, the folder it writes, the layer's requirements, flags and trimming. The whole command,
pip's layer, `sam build` and Terraform on its output: tests/deploy/test_your_app.py."""

from __future__ import annotations

import json
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from dormant.cli.main import app
from dormant.deploy import layer, package, render, scaffold
from dormant.deploy.errors import AppNotFoundError, LayerBuildError, ProjectExistsError
from tests.deploy.support import load_template


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    before, path = set(sys.modules), list(sys.path)
    yield scaffold.create("pkgshop", tmp_path)
    for name in set(sys.modules) - before:
        del sys.modules[name]
    sys.path[:] = path


def test_the_app_is_found_in_the_project_and_must_load(project: Path) -> None:
    source = package.find_app("pkgshop.app:registry", project)
    assert (source.path, source.name) == (project / "pkgshop", "pkgshop")
    with pytest.raises(AppNotFoundError, match="no package 'elsewhere'"):
        package.find_app("elsewhere.app:registry", project)
    with pytest.raises(AppNotFoundError, match="AttributeError"):
        package.find_app("pkgshop.app:nothing", project)
    with pytest.raises(AppNotFoundError, match="not a dormant Registry"):
        package.find_app("pkgshop.app:COOLING_OFF_SECONDS", project)


def test_a_src_layout_and_a_single_module_are_found(tmp_path: Path, project: Path) -> None:
    src = tmp_path / "srcproject"
    (src / "src").mkdir(parents=True)
    (project / "pkgshop").rename(src / "src" / "pkgshop")
    assert package.find_app("pkgshop.app:registry", src).root == (src / "src").resolve()
    single = tmp_path / "single"
    single.mkdir()
    (single / "solo_app.py").write_text("from dormant import setup\nregistry = setup()\n")
    source = package.find_app("solo_app:registry", single)
    assert source.name == "solo_app" and "solo_app.py" in package.code_files(source)


def test_the_bundle_holds_dormant_the_entry_points_and_the_app(project: Path) -> None:
    (project / "pkgshop" / "prices.json").write_text("{}")  # the package's data files go with it
    (project / "pkgshop" / "__pycache__").mkdir()
    (project / "pkgshop" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"")
    files = package.code_files(package.find_app("pkgshop.app:registry", project))
    assert {"functions/api/handler.py", "functions/worker/handler.py", "pkgshop/app.py", "pkgshop/__init__.py",
            "pkgshop/prices.json", "dormant/__init__.py", "dormant/aws/worker.py",
            "dormant/http/static/ui/index.html"} <= set(files)
    assert not any("__pycache__" in name or name.startswith("dormant/deploy/files/") for name in files)
    assert not any(name.startswith("tests/") for name in files)  # the project's tests stay home
    assert files["functions/worker/handler.py"] == (render.shipped() / "functions/worker/handler.py").read_bytes()


def test_the_deployment_files(tmp_path: Path) -> None:
    package.write_deployment(tmp_path, "pkgshop.app:registry")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Makefile", "README.md", "template.yaml", "terraform"]
    template = load_template((tmp_path / "template.yaml").read_text())
    assert template["Parameters"]["App"]["Default"] == "pkgshop.app:registry"
    for function in ("WorkerFunction", "ApiFunction", "AuthorizerFunction"):
        assert template["Resources"][function]["Properties"]["CodeUri"] == "bundle/"
        assert template["Resources"][function]["Metadata"]["BuildMethod"] == "makefile"
    assert template["Resources"]["DependenciesLayer"]["Properties"]["ContentUri"] == "layer/"
    makefile = (tmp_path / "Makefile").read_text()
    assert "build-WorkerFunction build-ApiFunction build-AuthorizerFunction:\n" in makefile
    assert "build-DependenciesLayer:\n" in makefile
    assert 'default     = "pkgshop.app:registry"' in (tmp_path / "terraform" / "variables.tf").read_text()


def test_the_output_folder_is_empty_or_an_earlier_package(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    with pytest.raises(ProjectExistsError):
        package.prepare_out(mine)
    assert (mine / "keep.txt").read_text() == "mine"
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / package.MARKER).write_text("{}")
    (earlier / "stale.txt").write_text("")
    package.prepare_out(earlier)
    assert list(earlier.iterdir()) == []


def test_the_zips_are_reproducible(tmp_path: Path) -> None:
    (tmp_path / "tree" / "a").mkdir(parents=True)
    (tmp_path / "tree" / "a" / "x.py").write_text("x = 1\n")
    (tmp_path / "tree" / "b.py").write_text("")
    package.write_zip(tmp_path / "one.zip", tmp_path / "tree")
    (tmp_path / "tree" / "b.py").touch()
    package.write_zip(tmp_path / "two.zip", tmp_path / "tree")
    assert (tmp_path / "one.zip").read_bytes() == (tmp_path / "two.zip").read_bytes()
    assert zipfile.ZipFile(tmp_path / "one.zip").namelist() == ["a/x.py", "b.py"]


def test_the_layer_holds_dormant_s_runtime_dependencies_and_the_project_s(project: Path) -> None:
    ours = layer.dormant_requirements()
    names = {layer.distribution_name(r) for r in ours}
    assert {"pydantic", "boto3", "fastapi", "mangum"} <= names
    assert not names & {"uvicorn", "httpx", "typer", "rich", "moto", "pytest", "dormant"}
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('dependencies = ["dormant', 'dependencies = ["stripe>=12", '
                                                                                '"Dormant_X==1", "dormant'))
    assert layer.project_requirements(project) == ["stripe>=12", "Dormant_X==1"]


def test_pip_builds_for_lambda_s_python_on_arm64(tmp_path: Path) -> None:
    command = layer.pip_command(tmp_path, ["boto3==1"])
    for flag in (["--platform", "manylinux2014_aarch64"], ["--python-version", "3.13"], ["--implementation", "cp"],
                 ["--target", str(tmp_path)]):
        assert any(command[i:i + 2] == flag for i in range(len(command))), flag
    assert "--only-binary=:all:" in command and command[-1] == "boto3==1"


def test_the_layer_is_trimmed_of_what_a_function_never_loads(tmp_path: Path) -> None:
    for folder in ("bin", "pip", "pip-25.0.dist-info", "pydantic/v1", "pydantic/main", "botocore/data/dynamodb",
                   "botocore/data/ec2", "boto3/data/sqs", "boto3/data/ec2"):
        (tmp_path / folder).mkdir(parents=True)
    layer.trim(tmp_path)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_dir())
    assert left == ["boto3", "boto3/data", "boto3/data/sqs", "botocore", "botocore/data", "botocore/data/dynamodb",
                    "pydantic", "pydantic/main"]


def test_the_command_refuses_by_name_and_writes_nothing(project: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "out"

    def package_command(*args: str) -> Result:
        return runner.invoke(app, ["package", "--project", str(project), "--out", str(out), *args],
                             env={"COLUMNS": "80"})

    bad = package_command("--app", "pkgshop.app")
    assert bad.exit_code == 2 and "InvalidAppSpecError" in bad.stderr and "module:attribute" in bad.stderr
    missing = package_command("--app", "elsewhere.app:registry")
    assert missing.exit_code == 2 and "AppNotFoundError" in missing.stderr
    assert not out.exists()
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    taken = package_command("--app", "pkgshop.app:registry")
    assert taken.exit_code == 2 and "ProjectExistsError" in taken.stderr
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_a_whole_package_with_a_stand_in_layer(project: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """package() end to end but pip (tests/deploy/test_your_app.py runs it): what it writes, the zips Terraform
    deploys, and a run that failed halfway is replaced by the next."""
    out = tmp_path / "build"

    def failing(site: Path, requirements: list[str]) -> None:
        raise LayerBuildError("no wheel")

    monkeypatch.setattr(layer, "build", failing)
    with pytest.raises(LayerBuildError):
        package.package("pkgshop.app:registry", out, project, bytecode=False)
    assert json.loads((out / package.MARKER).read_text())["complete"] is False

    def stand_in(site: Path, requirements: list[str]) -> None:
        (site / "python" / "boto3").mkdir(parents=True)
        (site / "python" / "boto3" / "__init__.py").write_text("")

    monkeypatch.setattr(layer, "build", stand_in)
    everything = package.code_files  # (dormant's 3.7 MB zipped takes a second: two of its modules stand in)
    monkeypatch.setattr(package, "code_files", lambda source: {
        name: data for name, data in everything(source).items()
        if not name.startswith("dormant/") or name in ("dormant/__init__.py", "dormant/aws/worker.py")})
    requirements = package.package("pkgshop.app:registry", out, project, bytecode=False)
    assert json.loads((out / package.MARKER).read_text()) == {
        "app": "pkgshop.app:registry", "dormant": package.dormant_version(), "requirements": requirements,
        "complete": True, "bytecode": False}
    assert sorted(p.name for p in out.iterdir()) == [
        "Makefile", "README.md", "bundle", package.MARKER, "layer", "template.yaml", "terraform"]
    code = zipfile.ZipFile(out / "terraform" / ".build" / "code.zip").namelist()
    assert "pkgshop/app.py" in code and "functions/api/handler.py" in code and "dormant/aws/worker.py" in code
    assert zipfile.ZipFile(out / "terraform" / ".build" / "layer.zip").namelist() == ["python/boto3/__init__.py"]
