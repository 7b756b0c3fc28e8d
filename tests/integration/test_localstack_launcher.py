"""The LocalStack launcher (tests/localstack.py, `make localstack`) as an operator meets it: a taken port is refused
with a message, and a kill -9 of whoever started it leaves no LocalStack and no JVM behind (LocalStack starts
DynamoDB Local in a session of its own, which no process-group kill would reach)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.localstack import ON_LOCALSTACK, children, venv_python
from tests.servers import ROOT, free_port


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_a_taken_port_is_refused_with_a_message() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "tests.localstack", "--port", str(port)], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert f"127.0.0.1:{port} is taken" in done.stderr and "LOCALSTACK_PORT" in done.stderr


@pytest.mark.parametrize("marks", [pytest.param(None, marks=ON_LOCALSTACK, id="localstack")])
def test_a_kill_9_of_its_parent_leaves_nothing_behind(marks: None, tmp_path: Path) -> None:
    try:
        venv_python()
    except RuntimeError as error:
        pytest.skip(str(error))
    log = tmp_path / "launcher.log"
    port = free_port()
    # A shell as the parent (as make is for `make localstack`); `& wait` keeps it from exec-ing the launcher.
    parent = subprocess.Popen(["bash", "-c", f"{sys.executable} -m tests.localstack --port {port} --parent $$ "
                                             f"> {log} 2>&1 & wait"], cwd=ROOT)
    try:
        deadline = time.monotonic() + 90
        while "is ready" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline and parent.poll() is None, log.read_text()
            time.sleep(0.2)
        [launcher] = children(parent.pid)
        [localstack] = children(launcher)
        jvm = children(localstack)
        assert jvm, "LocalStack had started DynamoDB Local"
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=5)
        deadline = time.monotonic() + 15
        while any(_alive(pid) for pid in (launcher, localstack, *jvm)):
            assert time.monotonic() < deadline, [pid for pid in (launcher, localstack, *jvm) if _alive(pid)]
            time.sleep(0.2)
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing listens there any more
    finally:
        if parent.poll() is None:
            parent.kill()
