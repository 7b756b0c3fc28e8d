"""Shell blocks run against a `dormant dev` a test started: the block's own lines through bash, with what only the
test may choose put in (the port it got, the data directory, this interpreter's bin for `.venv/bin/`)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.docs.blocks import ROOT, Block, commands
from tests.e2e.devprocess import DevProcess, environment

DEV_PORT = "8787"  # what the docs' commands talk to: `dormant dev`'s default


@dataclass(slots=True)
class Ran:
    command: str
    returncode: int
    stdout: str
    stderr: str


def expected_output(command: str) -> object | None:
    """A command's trailing `# {...}` comment, when it is a JSON value: what the page says it prints."""
    _, hashed, comment = command.partition("  # ")
    if not hashed:
        return None
    try:
        return json.loads(comment.strip())
    except ValueError:
        return None


def run_session(block: Block, workdir: Path, deadline: float = 30) -> list[Ran]:
    """The block's first line starts `dormant dev` (its arguments as written, on a free port and a data directory
    of the test's); each later line runs in bash in `workdir` and must exit 0; a line whose comment shows JSON is
    run again (a read of what the worker has not done yet) until it prints that, or `deadline` passes."""
    lines = commands(block)
    first = shlex.split(lines[0], comments=True)
    assert first[:2] == [".venv/bin/dormant", "dev"], f"{block.where}: the session starts with dormant dev"
    env = environment(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])))
    dev = DevProcess(workdir / "dev-data", *first[2:], env=env)
    dev.args = dev.args[2:]  # the page's --app (DevProcess puts its own first)
    dev.start()
    bin_dir = str(Path(sys.executable).parent) + "/"
    env = {**env, "DORMANT_URL": dev.url}  # where `dormant` commands without --url go (their default is :8787)
    ran: list[Ran] = []
    try:
        for line in lines[1:]:
            command = line.replace(".venv/bin/", bin_dir).replace(f"localhost:{DEV_PORT}", f"127.0.0.1:{dev.port}") \
                .replace(f"127.0.0.1:{DEV_PORT}", f"127.0.0.1:{dev.port}")
            expected = expected_output(line)
            until = time.monotonic() + deadline
            while True:
                result = subprocess.run(["bash", "-c", command], cwd=workdir, env=env, capture_output=True, text=True,
                                        timeout=120, stdin=subprocess.DEVNULL)
                assert result.returncode == 0, f"{block.where}: {line}\n-> {result.returncode}\n{result.stdout}" \
                                               f"\n{result.stderr}\n{dev.output()[-3000:]}"
                if expected is None or _json(result.stdout) == expected:
                    break
                assert time.monotonic() < until, f"{block.where}: {line}\nprinted {result.stdout!r}, the page " \
                                                  f"shows {json.dumps(expected)}"
                time.sleep(0.2)
            ran.append(Ran(line, result.returncode, result.stdout, result.stderr))
    finally:
        dev.stop()
    return ran


def _json(text: str) -> object | None:
    try:
        return json.loads(text)
    except ValueError:
        return None
