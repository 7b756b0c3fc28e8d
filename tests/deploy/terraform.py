"""Terraform on infra/, offline: the AWS provider found on this machine (or the registry, where it is reachable),
`terraform init`, `validate`, `apply` against a moto server, plans of a stage change, `destroy`.

The run takes minutes (the AWS provider waits about 25 s for each SQS queue's attributes to settle, and the
dead-letter queues come before the queues that redrive to them), almost all of it waiting: it starts in a
background thread as soon as the first deployment test runs (tests/deploy/conftest.py) and
tests/deploy/test_terraform.py waits for it; its `destroy` runs in the background after the last Terraform
test, and the session's end waits for it and checks that nothing is left.

The working directory is a copy of infra/ plus two override files: the provider's endpoints on the moto
server (S3 path-style), and the dev override docs/deploy.md describes (`prevent_destroy = false` on the table, the
bucket and the queues), so the test can destroy what it created.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.deploy.support import INFRA, REGION, ROOT, tool_environment
from tests.servers import MotoServer

# Where a Terraform provider mirror (registry.terraform.io/hashicorp/aws/<version>/<os_arch>/...) may be
PLUGIN_DIRS = ("/opt/tf-plugins", "~/.terraform.d/plugins", "~/.local/share/terraform/plugins",
               "/usr/local/share/terraform/plugins", "/usr/share/terraform/plugins")
SERVICES = ("apigatewayv2", "cloudwatch", "dynamodb", "iam", "lambda", "logs", "s3", "sns", "sqs", "ssm", "sts")
DATA_RESOURCES = ("aws_dynamodb_table.actors", "aws_s3_bucket.values", "aws_sqs_queue.wake", "aws_sqs_queue.timers",
                  "aws_sqs_queue.wake_dlq", "aws_sqs_queue.timers_dlq")
TOKEN_PARAMETER = "/dormant/inspector-token"
TOPIC = "dormant-ops"
# What the test applies: a JWT-authenticated API with an alarm topic, on a dev stack (deletion protection off)
APPLIED: dict[str, Any] = {"auth_mode": "jwt", "jwt_issuer": "https://issuer.example.com",
                           "jwt_audience": "aud-1,aud-2", "table_deletion_protection": False,
                           "alarm_topic_arn": f"arn:aws:sns:{REGION}:123456789012:{TOPIC}"}


def provider_mirror() -> Path | None:
    """A local plugin directory holding hashicorp/aws 5.100 or later, below 7 (what versions.tf admits)."""
    candidates = [os.environ.get("DORMANT_TF_PLUGIN_DIR", ""), *PLUGIN_DIRS]
    for candidate in candidates:
        if not candidate:
            continue
        directory = Path(candidate).expanduser()
        for binary in sorted(directory.glob("registry.terraform.io/hashicorp/aws/*/*/terraform-provider-aws*")):
            version = tuple(int(part) for part in re.findall(r"\d+", binary.parts[-3])[:2])
            if (5, 100) <= version < (7, 0):
                return directory
    return None


@dataclass
class Step:
    command: list[str]
    returncode: int
    output: str
    seconds: float


@dataclass
class TerraformRun:
    terraform: str
    mirror: Path | None
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="dormant-terraform-")))
    moto: MotoServer = field(default_factory=MotoServer)
    steps: dict[str, Step] = field(default_factory=dict)
    error: BaseException | None = None
    _thread: threading.Thread | None = None
    _destroyer: threading.Thread | None = None

    # -- the background part ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="terraform", daemon=True)
            self._thread.start()

    def wait(self, timeout: float = 600) -> None:
        self.start()
        assert self._thread is not None
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"terraform did not finish in {timeout} s: {sorted(self.steps)}")

    def _run(self) -> None:
        try:
            self.moto.start()
            self._prepare()
            if self.step("init").returncode != 0:
                return
            # validate beside apply, and the two plans side by side: each mostly waits (on the provider
            # loading its schema, on SQS); together they save half a minute
            if self._together("validate", "apply")["apply"].returncode != 0:
                return
            # without the dev override: prevent_destroy holds (the plan that keeps the data needs no override)
            dev = self.workdir / "dev_override.tf"
            kept = dev.read_text()
            dev.unlink()
            try:
                self._together("plan-stage-kept", "plan-stage-lost")
            finally:
                dev.write_text(kept)
        except BaseException as error:  # reported by the tests that wait for the run
            self.error = error

    def _together(self, *names: str) -> dict[str, Step]:
        threads = [threading.Thread(target=self.step, args=(name,), name=f"terraform {name}") for name in names]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        missing = [name for name in names if name not in self.steps]
        if missing:
            raise RuntimeError(f"terraform {missing} did not run (see the test output)")
        return {name: self.steps[name] for name in names}

    def destroy_in_background(self) -> None:
        """`terraform destroy` after the last test that needs the resources; `close()` waits for it."""
        self._destroyer = threading.Thread(target=self.step, args=("destroy",), name="terraform destroy",
                                           daemon=True)
        self._destroyer.start()

    def leftovers(self) -> list[str]:
        """What a destroy left on the moto server (empty when it removed everything)."""
        import boto3  # type: ignore[import-untyped]

        def client(service: str) -> Any:
            return boto3.client(service, endpoint_url=self.moto.endpoint, region_name=REGION,
                                aws_access_key_id="testing", aws_secret_access_key="testing")
        found = [f"table {name}" for name in client("dynamodb").list_tables()["TableNames"]]
        found += [f"queue {url}" for url in client("sqs").list_queues().get("QueueUrls", [])]
        found += [f"function {f['FunctionName']}" for f in client("lambda").list_functions()["Functions"]]
        found += [f"alarm {a['AlarmName']}" for a in client("cloudwatch").describe_alarms()["MetricAlarms"]]
        found += [f"api {a['Name']}" for a in client("apigatewayv2").get_apis()["Items"]]
        found += [f"bucket {b['Name']}" for b in client("s3").list_buckets()["Buckets"]]
        return found

    def _prepare(self) -> None:
        import boto3  # type: ignore[import-untyped]

        for path in INFRA.glob("*.tf"):
            shutil.copy(path, self.workdir / path.name)
        (self.workdir / "none.tfrc").write_text("")
        (self.workdir / "moto_override.tf").write_text(moto_override(self.moto.endpoint))
        (self.workdir / "dev_override.tf").write_text(DEV_OVERRIDE)
        layer = self.workdir / "layer"
        (layer / "python").mkdir(parents=True)
        (layer / "python" / "placeholder.py").write_text("")  # the real layer's build is test_sam_build's
        result = subprocess.run(["make", "--no-print-directory", "infra-zips", f"INFRA_BUILD={self.workdir / 'zips'}",
                                 f"LAYER_DIR={layer}"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                                check=False)
        self.steps["zips"] = Step(["make", "infra-zips"], result.returncode, result.stdout + result.stderr, 0.0)
        if result.returncode != 0:
            raise RuntimeError(f"make infra-zips failed: {result.stdout}{result.stderr}")
        clients = {name: boto3.client(name, endpoint_url=self.moto.endpoint, region_name=REGION,
                                      aws_access_key_id="testing", aws_secret_access_key="testing")
                   for name in ("ssm", "sns")}
        clients["ssm"].put_parameter(Name=TOKEN_PARAMETER, Type="SecureString", Value="operator-token")
        clients["sns"].create_topic(Name=TOPIC)

    # -- commands ---------------------------------------------------------------------------------------
    def variables(self, **extra: Any) -> list[str]:
        values = {**APPLIED, "code_zip": str(self.workdir / "zips" / "code.zip"),
                  "layer_zip": str(self.workdir / "zips" / "layer.zip"), **extra}
        return [f"-var={name}={json.dumps(v) if isinstance(v, bool) else v}" for name, v in values.items()]

    def command(self, name: str) -> list[str]:
        common = ["-input=false", "-no-color"]
        if name == "init":
            mirror = [f"-plugin-dir={self.mirror}"] if self.mirror is not None else []
            return ["init", *common, *mirror]
        if name == "validate":
            return ["validate", "-no-color"]
        if name == "apply":
            return ["apply", *common, "-auto-approve", *self.variables()]
        if name == "plan-stage-kept":  # stage changes, the data keeps its names: nothing stateful is replaced
            return ["plan", *common, "-refresh=false", "-lock=false", "-json",
                    *self.variables(stage="prod", data_name_prefix="dormant-dev")]
        if name == "plan-stage-lost":  # stage changes alone: the table and queues would be replaced
            return ["plan", *common, "-refresh=false", "-lock=false", *self.variables(stage="prod")]
        if name == "destroy":
            return ["destroy", *common, "-auto-approve", "-refresh=false", *self.variables()]
        raise ValueError(name)

    def step(self, name: str) -> Step:
        arguments = self.command(name)
        env = tool_environment(TF_CLI_CONFIG_FILE=str(self.workdir / "none.tfrc"), TF_IN_AUTOMATION="1",
                               AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
        started = time.monotonic()
        result = subprocess.run([self.terraform, *arguments], cwd=self.workdir, env=env, capture_output=True,
                                text=True, timeout=400, check=False)
        self.steps[name] = Step(arguments, result.returncode, result.stdout + result.stderr,
                                time.monotonic() - started)
        return self.steps[name]

    # -- what it left -----------------------------------------------------------------------------------
    def state(self) -> dict[str, dict[str, Any]]:
        """Terraform address -> the attributes of the one instance (counted resources: their [0])."""
        raw = json.loads((self.workdir / "terraform.tfstate").read_text())
        found = {}
        for resource in raw["resources"]:
            address = f"{resource['type']}.{resource['name']}"
            if resource["mode"] == "data":
                address = "data." + address
            for instance in resource["instances"]:
                found[address] = instance["attributes"]
        return found

    def planned_changes(self, name: str) -> dict[str, str]:
        """address -> action ("update", "replace", "no-op", ...) from a `plan -json` step's messages."""
        actions = {}
        for line in self.steps[name].output.splitlines():
            if not line.startswith("{"):
                continue
            message = json.loads(line)
            if message.get("type") == "planned_change":
                change = message["change"]
                actions[change["resource"]["addr"]] = change["action"]
        return actions

    def close(self) -> None:
        """Wait for the run (and the destroy, if one was started), then stop moto and remove the copy. Raises
        AssertionError when the destroy failed or left something behind."""
        try:
            if self._thread is not None:
                self._thread.join(600)
            if self._destroyer is not None:
                self._destroyer.join(600)
                destroyed = self.steps.get("destroy")
                assert destroyed is not None and destroyed.returncode == 0, \
                    "terraform destroy failed:\n" + (destroyed.output[-3000:] if destroyed else "did not run")
                left = self.leftovers()
                assert left == [], f"terraform destroy left {left}"
        finally:
            self.moto.stop()
            shutil.rmtree(self.workdir, ignore_errors=True)


def moto_override(endpoint: str) -> str:
    """The AWS provider on a moto server: every service at `endpoint`, S3 path-style, no credentials checked."""
    endpoints = "\n".join(f'    {service} = "{endpoint}"' for service in SERVICES)
    return ('provider "aws" {\n  region                      = "' + REGION + '"\n'
            '  access_key                  = "testing"\n  secret_key                  = "testing"\n'
            "  skip_credentials_validation = true\n  skip_requesting_account_id  = true\n"
            "  skip_metadata_api_check     = true\n  s3_use_path_style           = true\n"
            "  endpoints {\n" + endpoints + "\n  }\n}\n")


DEV_OVERRIDE = "".join(
    f'resource "{address.split(".")[0]}" "{address.split(".")[1]}" {{\n  lifecycle {{\n    prevent_destroy = false\n'
    "  }\n}\n\n" for address in DATA_RESOURCES)
