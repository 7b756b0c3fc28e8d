"""A real `dormant dev` subprocess for the end-to-end tests: started on a free port with its own data
directory, its console written to a file (never a pipe the test might not drain), its moto child found."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dormant.dev.stack import free_port
from tests.servers import fake_aws_environment
from tests.waiting import dev_answers

ROOT = Path(__file__).resolve().parents[2]
# `dormant dev` stops within 2 s (docs/dev-stack.md; 0.3-0.8 s measured on an idle machine): what the tests hold a stop
# to is generous, for a loaded machine (4.8 s was seen with two other test workers on 2 cores), and still far below
# what a stop that waited for something would take (a poller's 20 s long poll, uvicorn's keep-alive connections).
STOP_BOUND = 10.0


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DORMANT_"))}
    return {**env, **fake_aws_environment(), "PYTHONUNBUFFERED": "1", **extra}


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie has ended


class DevProcess:
    """`python -m dormant.cli dev --app APP --port P --data-dir D ...`."""

    def __init__(self, data_dir: Path, *args: str, app: str = "examples.counter:registry",
                 env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = ["--app", app, "--port", str(self.port), "--data-dir", str(data_dir), *args]
        self.env = env or environment()
        self.console = data_dir.parent / f"console-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> DevProcess:
        with open(self.console, "ab") as out:
            self.process = subprocess.Popen([sys.executable, "-m", "dormant.cli", "dev", *self.args], cwd=ROOT,
                                            env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        dev_answers(self.url, self.process, self.output, timeout=timeout)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def moto_pid(self) -> int:
        found = [pid for pid in children(self.pid)
                 if b"dormant.dev.moto" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(found) == 1, found
        return found[0]

    def output(self) -> str:
        return self.console.read_text(errors="replace") if self.console.exists() else ""

    def stop(self, signum: int = signal.SIGINT, timeout: float = 30) -> float:
        """Send `signum`; seconds until the process exited."""
        assert self.process is not None
        started = time.monotonic()
        self.process.send_signal(signum)
        self.process.wait(timeout=timeout)
        return time.monotonic() - started

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
