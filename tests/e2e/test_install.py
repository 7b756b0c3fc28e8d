"""The README's "Use it in your own project", run as written: the wheel built from a clean copy of the source,
installed with its `dev` extra into a virtual environment of its own, and from it `dormant dev --help`, a short
`dormant dev` serving the README's `myapp.py` from a project directory outside this repository, and pytest on
the README's `test_myapp.py` with the README's pytest settings.

The virtual environment is kept in build/test-install, keyed by what it holds (the wheel's requirements, the
pytest pins, this Python): a new key starts from an empty one (about 30 s), an unchanged key reinstalls only the
freshly built wheel. Either way nothing else is in it, so a dependency the extra forgets fails here.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dormant.dev.stack import free_port
from tests.docs.blocks import doc_blocks
from tests.servers import fake_aws_environment
from tests.waiting import dev_answers, until
from tools import lock

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "test-install"


def blocks(language: str) -> list[str]:
    """The section's blocks (`<!-- run: readme-own-project -->`) in one language."""
    return [block.text for block in doc_blocks("readme-own-project") if block.lang == language]


def run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"{command} -> {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def user_environment(**extra: str) -> dict[str, str]:
    """A user's shell: nothing of this repository or its venv on the paths, no AWS account reachable."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "DORMANT_", "PYTHON", "VIRTUAL_ENV", "PYTEST"))}
    return {**env, **fake_aws_environment(), "PYTHONUNBUFFERED": "1", **extra}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # a copy of the checkout (its files, not what git ignores): no build/ left over from earlier builds, and
    # examples/, tests/, functions/ beside lib/ as in the repository, for the wheel to leave out
    source = tmp_path_factory.mktemp("source")
    listed = run("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", cwd=ROOT).stdout
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    assert (source / "examples" / "counter.py").is_file() and (source / "lib" / "dormant" / "cli").is_dir()
    dist = tmp_path_factory.mktemp("dist")
    built = run(sys.executable, "-m", "pip", "wheel", source, "--no-deps", "-w", dist)
    assert "Warning" not in built.stderr and "deprecated" not in built.stderr, built.stderr  # the license table
    (found,) = dist.glob("dormant-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel: Path) -> Iterator[Path]:
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(archive.read(n) for n in archive.namelist() if n.endswith(".dist-info/METADATA")).decode()
    requirements = sorted(line for line in metadata.splitlines() if line.startswith("Requires-Dist:"))
    pins = re.findall(r"pytest\S*==\S+", blocks("sh")[0])
    key = hashlib.sha256(json.dumps([requirements, pins, sys.version]).encode()).hexdigest()[:16]
    home = CACHE / key
    python = home / "bin" / "python"
    if not (home / ".complete").exists():
        shutil.rmtree(CACHE, ignore_errors=True)  # other keys: environments of older requirements
        run(sys.executable, "-m", "venv", home)
        run(python, "-m", "pip", "install", "--quiet", "--no-compile", f"{wheel}[dev]", *pins, timeout=600,
            env=user_environment())  # not this checkout's PYTHONPATH: pip would take its dormant as installed
        (home / ".complete").write_text(key)
    else:
        run(python, "-m", "pip", "install", "--quiet", "--no-compile", "--no-deps", "--force-reinstall", wheel,
            env=user_environment())
    yield home


def test_the_wheel_holds_the_library_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(archive.read(n) for n in names if n.endswith(".dist-info/METADATA")).decode()
    assert {name.split("/")[0] for name in names} == {"dormant", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "dormant/http/static/ui/index.html" in names and "dormant/py.typed" in names
    assert "License-Expression: Apache-2.0" in metadata
    requires = [line.removeprefix("Requires-Dist: ") for line in metadata.splitlines()
                if line.startswith("Requires-Dist: ")]
    assert "Provides-Extra: dev" in metadata
    # the dev extra: moto's DynamoDB, SQS and S3 and its server app, not moto[server] (cfn-lint, docker, xray ...)
    (moto,) = [r for r in requires if r.startswith("moto[") and r.endswith('extra == "dev"')]
    assert set(moto[5:moto.index("]")].split(",")) == {"dynamodb", "s3", "sqs"}, moto
    assert not any(r.startswith("moto") and "extra" not in r for r in requires)
    # ranges, as a library declares them: no exact pin (uv.lock has the repository's exact versions)
    assert requires and not [r for r in requires if "==" in r.split(";")[0]], requires


def test_the_readme_pins_the_project_s_pytest() -> None:
    readme = re.findall(r"pytest\S*==\S+", blocks("sh")[0])
    locked = lock.locked()
    assert readme and all([(version, "")] == locked[name] for name, version in (p.split("==") for p in readme))


@pytest.mark.timeout(600)  # a new environment is a pip install of every dependency (30-90 s on 2 busy cores)
def test_a_project_of_its_own(venv: Path, tmp_path: Path) -> None:
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert not (site / "examples").exists() and (site / "dormant").is_dir()
    dormant = venv / "bin" / "dormant"
    helptext = run(dormant, "dev", "--help", cwd=tmp_path, env=user_environment(COLUMNS="120")).stdout
    assert "--app" in helptext and "--endpoint" in helptext

    project = tmp_path / "myproject"
    project.mkdir()
    myapp, test_myapp = blocks("python")
    (project / "myapp.py").write_text(myapp)
    (project / "test_myapp.py").write_text(test_myapp)
    (project / "pyproject.toml").write_text(blocks("toml")[0])
    examples = subprocess.run([venv / "bin" / "python", "-c", "import examples"], cwd=project,
                              env=user_environment(), capture_output=True, text=True, timeout=60)
    assert examples.returncode == 1 and "No module named 'examples'" in examples.stderr

    tested = run(venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project,
                 env=user_environment())
    assert "1 passed" in tested.stdout and "warning" not in (tested.stdout + tested.stderr).lower(), tested.stdout

    port = free_port()
    with open(tmp_path / "console.log", "wb") as console:
        process = subprocess.Popen([dormant, "dev", "--app", "myapp:registry", "--port", str(port)], cwd=project,
                                   env=user_environment(), stdout=console, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        dev_answers(url, process, (tmp_path / "console.log").read_text)
        sent = urllib.request.Request(f"{url}/actors/tally/main/queues/add", data=b'{"amount": 5}', method="POST",
                                      headers={"Content-Type": "application/json"})
        assert urllib.request.urlopen(sent, timeout=10).status == 202

        def added() -> bool:
            with urllib.request.urlopen(f"{url}/actors/tally/main/state", timeout=10) as response:
                return bool(json.loads(response.read()) == {"total": 5})

        until(added, timeout=60, what=lambda: (tmp_path / "console.log").read_text(), interval=0.2)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    output = (tmp_path / "console.log").read_text()
    assert process.returncode == 0, output
    assert "dormant dev: serving myapp:registry" in output and "Traceback" not in output
    assert (project / ".dormant" / "dev").is_dir()  # its data, in the project
