"""docs/your-app.md run as written, as a new user would: in an empty folder holding only the wheel built from this
checkout, a fresh virtual environment, `dormant new shop`, its tests, `dormant package`, `sam validate --lint`,
`sam build`, `terraform init` and `validate` (every `$ ` line of the page's console blocks, in order, in one shell),
with nothing of the checkout on the Python path. Then the packaged Terraform module is applied to a moto server and
destroyed, and nothing is left.

Tier 2 (tests/deploy): it needs the deployment tools (DORMANT_DEPLOY_TOOLS: sam, cfn-lint), terraform and its AWS
provider, and downloads the dependencies (pip's cache keeps them) and the layer's wheels for Lambda.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.deploy.support import REGION, ROOT, deploy_tool, terraform, tool_environment
from tests.deploy.terraform import DEV_OVERRIDE, moto_override, provider_mirror
from tests.docs.blocks import doc_blocks
from tests.servers import MotoServer


def page_commands() -> list[str]:
    """Every command of the page's console blocks (marked `<!-- run: your-app -->`; the `$ ` lines), in order."""
    return [line[2:] for block in doc_blocks("your-app") for line in block.text.splitlines()
            if line.startswith("$ ")]


def run(command: list[str | Path], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, f"{command} -> {result.returncode}\n{result.stdout[-5000:]}\n{result.stderr[-5000:]}"
    return result.stdout + result.stderr


def user_environment(home: Path) -> dict[str, str]:
    """A user's shell: nothing of this checkout or its venv (no PYTHONPATH), the SAM CLI and terraform on the PATH,
    Terraform's AWS provider from this machine's mirror (when there is one), no AWS account."""
    env = {k: v for k, v in tool_environment().items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PYTEST", "COV_"))}
    tools = deploy_tool("sam").parent
    mirror = provider_mirror()
    config = home / "terraform.tfrc"
    config.write_text("" if mirror is None else
                      f'provider_installation {{\n  filesystem_mirror {{\n    path = "{mirror}"\n  }}\n}}\n')
    # the tools' venv last: `python3` is the machine's, not that venv's
    return {**env, "PATH": f"{env['PATH']}{os.pathsep}{tools}", "TF_CLI_CONFIG_FILE": str(config),
            "TF_IN_AUTOMATION": "1", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout's files (git's view: nothing ignored, no build/ leftovers)."""
    source = tmp_path_factory.mktemp("source")
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--quiet", "-w", str(dist)],
                   check=True, capture_output=True, timeout=300)
    (found,) = dist.glob("dormant-*.whl")
    return found


def test_the_page_s_commands_are_the_ones_this_test_runs() -> None:
    commands = page_commands()
    assert commands[:3] == ["python3 -m venv .venv",
                            ".venv/bin/pip install --quiet ./dormant-*.whl pytest pytest-asyncio",
                            ".venv/bin/dormant new shop"]
    assert "make package BIN=../.venv/bin" in commands and "terraform validate" in commands
    assert any(c.startswith("sam validate --lint") for c in commands)
    assert any(c.startswith("sam build") for c in commands)


def test_the_wheel_ships_the_deployment(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"dormant/deploy/files/template.yaml", "dormant/deploy/files/terraform/main.tf",
            "dormant/deploy/files/functions/api/handler.py",
            "dormant/deploy/files/functions/worker/handler.py"} <= names


@pytest.mark.timeout(1800)  # pip installs, the layer's wheels, terraform init, and an apply on moto (SQS waits)
def test_a_user_s_app_from_nothing_to_terraform_apply(wheel: Path, tmp_path: Path) -> None:
    terraform()  # skips (or fails under make check) without terraform
    folder = tmp_path / "empty"
    folder.mkdir()
    shutil.copy(wheel, folder / wheel.name)
    env = user_environment(tmp_path)

    # the page, as a user types it: one shell, stopping at the first failing command
    script = "set -eu\n" + "\n".join(f"echo '>>> {c}' >&2\n{c}" for c in page_commands())
    output = run(["bash", "-c", script], folder, env, timeout=1500)

    shop = folder / "shop"
    python = folder / ".venv" / "bin" / "python"
    where = run([python, "-c", "import dormant; print(dormant.__file__)"], shop, env).strip().splitlines()[-1]
    assert where.startswith(str(folder / ".venv")), f"dormant imported from {where}, not the venv"
    assert re.search(r"3 passed", output), output[-3000:]
    build = shop / "build"
    assert "Default: shop.app:registry" in (build / "template.yaml").read_text()
    assert (build / "bundle" / "shop" / "app.py").is_file() and (build / "bundle" / "functions").is_dir()
    assert (build / "layer" / "python" / "pydantic").is_dir() and (build / "layer" / "python" / "boto3").is_dir()
    pydantic_core = list((build / "layer" / "python" / "pydantic_core").glob("_pydantic_core.*.so"))
    assert pydantic_core and all("aarch64" in p.name and "313" in p.name for p in pydantic_core), pydantic_core
    built = shop / ".aws-sam" / "build"
    assert (built / "WorkerFunction" / "shop" / "app.py").is_file()
    assert (built / "DependenciesLayer" / "python" / "boto3").is_dir()
    assert "The configuration is valid." in output  # terraform validate (its "Success!" is in colour)

    apply_and_destroy(build / "terraform", env)


def apply_and_destroy(module: Path, env: dict[str, str]) -> None:
    """The packaged module (initialized by the page's commands) applied to moto as it is, plus the overrides a dev
    stack on moto needs (the provider's endpoints, prevent_destroy off), then destroyed: nothing is left."""
    moto = MotoServer()
    moto.start()
    try:
        (module / "moto_override.tf").write_text(moto_override(moto.endpoint))
        (module / "dev_override.tf").write_text(DEV_OVERRIDE)
        tf_env = {**env, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
        flags = ["-input=false", "-no-color", "-auto-approve", "-var=table_deletion_protection=false",
                 "-var=name=shop"]
        applied = run(["terraform", "apply", *flags], module, tf_env, timeout=900)
        assert "Apply complete!" in applied, applied[-3000:]

        def client(service: str) -> Any:
            return boto3.client(service, endpoint_url=moto.endpoint, region_name=REGION,
                                aws_access_key_id="testing", aws_secret_access_key="testing")

        functions = {f["FunctionName"]: f for f in client("lambda").list_functions()["Functions"]}
        assert set(functions) == {"shop-dev-worker", "shop-dev-api"}
        assert functions["shop-dev-worker"]["Environment"]["Variables"]["DORMANT_APP"] == "shop.app:registry"
        assert client("dynamodb").list_tables()["TableNames"] == ["shop-dev-actors"]

        destroyed = run(["terraform", "destroy", *flags], module, tf_env, timeout=900)
        assert "Destroy complete!" in destroyed, destroyed[-3000:]
        left = [*client("dynamodb").list_tables()["TableNames"],
                *client("sqs").list_queues().get("QueueUrls", []),
                *(f["FunctionName"] for f in client("lambda").list_functions()["Functions"]),
                *(b["Name"] for b in client("s3").list_buckets()["Buckets"])]
        assert left == [], f"terraform destroy left {left}"
    finally:
        moto.stop()
