"""docs/deploy.md, "Try the Terraform module on moto": the block run as the page writes it (from the repository root,
with the project's .venv, Terraform and the provider mirror), then what it claims: every resource it created was
destroyed, as many as the page says. Tier 2 (tests/conftest.py): minutes, mostly the AWS provider waiting on SQS."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from tests.deploy.support import terraform, tool_environment
from tests.docs.blocks import ROOT, doc_blocks

PORT = 5055  # the recipe's moto server
PAGE_CLAIM = re.compile(r"the recipe created and destroyed (\d+) resources")


def needs(what: str, ok: bool) -> None:
    if not ok:
        if os.environ.get("DORMANT_DEPLOY_TOOLS"):  # under `make check`: a missing tool is a failure
            pytest.fail(f"the recipe needs {what}")
        pytest.skip(f"the recipe needs {what}")


def leftovers(endpoint: str) -> list[str]:
    import boto3  # type: ignore[import-untyped]

    def client(service: str) -> object:
        return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                            aws_secret_access_key="testing")
    found: list[str] = list(client("dynamodb").list_tables()["TableNames"])  # type: ignore[attr-defined]
    found += client("sqs").list_queues().get("QueueUrls", [])  # type: ignore[attr-defined]
    found += [b["Name"] for b in client("s3").list_buckets()["Buckets"]]  # type: ignore[attr-defined]
    return found


@pytest.mark.timeout(900)
def test_the_terraform_recipe_applies_and_destroys_on_moto(tmp_path: Path) -> None:
    (block,) = doc_blocks("terraform-on-moto")
    needs("terraform", terraform() is not None)
    needs("the AWS provider in /opt/tf-plugins (the -plugin-dir it names)",
          any(Path("/opt/tf-plugins").glob("registry.terraform.io/hashicorp/aws/*/*/terraform-provider-aws*")))
    needs("the project's .venv (`make test` makes it)", (ROOT / ".venv" / "bin" / "moto_server").exists())
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", PORT)) != 0, f"port {PORT} is taken: the recipe's moto would not start"
    script = tmp_path / "recipe.sh"
    script.write_text(block.text)
    # -e: a failing step fails the run (a reader sees each error); a session of its own: the moto server it starts
    # in the background is stopped with it below
    process = subprocess.Popen(["bash", "-e", str(script)], cwd=ROOT, env=tool_environment(TF_IN_AUTOMATION="1"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                               stdin=subprocess.DEVNULL)
    try:
        output, _ = process.communicate(timeout=840)
        left = leftovers(f"http://127.0.0.1:{PORT}") if process.returncode == 0 else []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # the recipe's moto server (its group is this run's)
    assert process.returncode == 0, output[-6000:]
    applied = re.search(r"Apply complete! Resources: (\d+) added", output)
    destroyed = re.search(r"Destroy complete! Resources: (\d+) destroyed", output)
    assert applied and destroyed, output[-3000:]
    assert applied[1] == destroyed[1] and left == [], (applied[0], destroyed[0], left)
    assert re.search(r'^"https?://[^"\s]+"\s*$', output, re.MULTILINE), "terraform output api_url printed no URL"
    claim = PAGE_CLAIM.search((ROOT / block.page).read_text())
    assert claim and claim[1] == applied[1], f"docs/deploy.md says {claim and claim[1]} resources; it was {applied[1]}"
