"""`python -m dormant.dev.moto` as a child of `dormant dev`: started, watched, stopped.

Its output goes to a log file (never to a pipe nobody reads: a full 64 KiB pipe blocks every moto thread).
It runs in its own session, so a Ctrl-C reaches only `dormant dev`, which stops its pollers first and
the server last; and it is tied to this process (`--parent`, a lifeline pipe on its stdin, Linux's
parent-death signal), so it ends with it even when this process is killed with SIGKILL.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

LOG_ROTATE_BYTES = 10 * 1024 * 1024


class DevStackError(RuntimeError):
    """The local stack could not start (port taken, endpoint unreachable, data directory in use...)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class EmbeddedMoto:
    """The moto child process. `data_dir`: keep its state there; `log_path`: where its output goes."""

    def __init__(self, port: int = 0, *, data_dir: Path | None = None, log_path: Path) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self, timeout: float = 30.0) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.log_path.exists() and self.log_path.stat().st_size > LOG_ROTATE_BYTES:
            self.log_path.replace(self.log_path.with_name(self.log_path.name + ".1"))
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - the child writes to it until stop()
        command = [sys.executable, "-m", "dormant.dev.moto", str(self.port), "--parent", str(os.getpid()),
                   "--lifeline-stdin", "--keep-alive"]
        if self.data_dir is not None:
            command += ["--data-dir", str(self.data_dir)]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise DevStackError(f"the embedded moto server exited at start: {self.output()}")
            try:
                urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1).close()
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)
        self.stop()
        raise DevStackError(f"the embedded moto server did not answer on {self.url} within {timeout} s")

    def output(self, tail: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:].strip()
        except OSError:
            return ""

    def stop(self, timeout: float = 0.5) -> None:
        """SIGTERM (and end the lifeline); SIGKILL if it has not exited within `timeout` seconds. A SIGKILL loses
        nothing: every change is in the data directory's journal before its response was sent."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.terminate()
                if process.stdin is not None:
                    process.stdin.close()
                try:
                    process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=5)
            elif process.stdin is not None:
                process.stdin.close()
        if self._log is not None:
            self._log.close()
            self._log = None
