"""Console transcripts of the docs (```console blocks: `$ command` lines, each followed by what it printed) run as
written against a real `dormant dev`, each command's output compared with the page's.

What differs from run to run is normalized on both sides before the comparison: times and how long ago they were,
durations, ports, message ids (numbered in order of appearance, so an id the page shows twice must be the same id
twice), the run's working directory (the page's `/tmp/walk`), and the widths of table columns (runs of spaces and
rules). A `$ dormant dev ...` line (re)starts the stack in the background, on a free port and over the same data
(the page's terminal runs it in the foreground; `Ctrl-C` then the command again restarts it); `$ cd DIR` moves;
`$ echo $?` checks the previous command's exit code, which must otherwise be 0. A read (status, listings, history,
versions) is run again until it prints what the page shows, or a deadline passes: the worker runs a message after
the send that queued it answered, as it does for a reader.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from dormant.dev.stack import free_port
from tests.docs.blocks import ROOT, Block
from tests.e2e.devprocess import environment
from tests.waiting import dev_answers

PAGE_DIR = "/tmp/walk"  # where the page's transcripts ran; the test's own directory stands for it
READS = (("status",), ("state",), ("actors", "list"), ("actors", "count"), ("history", "show"), ("versions",),
         ("inbox",))
UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
VARYING = [  # (pattern, what stands for it), in this order
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"), "<time>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00"), "<time>"),
    (re.compile(r"\(?(?:[\d.]+ ?[dhms] )+ago\)?"), "<ago>"),  # "(7.5 s ago)", "(1m 51s ago)"
    (re.compile(r"\(in [\d.]+ ?[dhms](?: [\d.]+ ?[dhms])*\)"), "(in <later>)"),  # "(in 23h 59m)"
    (re.compile(r"\bin \d+ ms\b"), "in <n> ms"),
    (re.compile(r"\bfor [\d.]+ s\b"), "for <n> s"),
    (re.compile(r"\b\d+:\d\d:\d\d\b"), "<elapsed>"),  # a progress bar's
    (re.compile(r"(127\.0\.0\.1|localhost):\d+"), r"\1:<port>"),
]
RULES = re.compile(r"([━─═])\1*")
SPACES = re.compile(r"\s+")
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ ")  # the dev console's log, after (or before) its banner


@dataclass(slots=True)
class Step:
    command: str
    shown: list[str]  # the page's output lines


@dataclass(slots=True)
class Ids:
    """Message ids numbered by first appearance: the page's and the run's are compared by their numbers."""

    seen: dict[str, int] = field(default_factory=dict)

    def __call__(self, match: re.Match[str]) -> str:
        return f"<id{self.seen.setdefault(match[0], len(self.seen) + 1)}>"


def steps(block: Block) -> list[Step]:
    found: list[Step] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            found.append(Step(line[2:].strip(), []))
        else:
            assert found, f"{block.where}: a transcript starts with a `$ ` command: {line!r}"
            found[-1].shown.append(line)
    return found


def normalized(lines: list[str], ids: Ids, workdir: Path | None = None) -> list[str]:
    kept = []
    for line in lines:
        if workdir is not None:
            line = line.replace(str(workdir), PAGE_DIR)
        line = UUID.sub(ids, line)
        for pattern, stand_in in VARYING:
            line = pattern.sub(stand_in, line)
        line = SPACES.sub(" ", RULES.sub(r"\1", line)).strip()
        if line:
            kept.append(line)
    return kept


class Session:
    """One reader's terminals: the dev stack in one, the commands in another, in `workdir` (the page's /tmp/walk)."""

    def __init__(self, workdir: Path, deadline: float = 60) -> None:
        self.workdir = workdir
        self.cwd = workdir
        self.deadline = deadline
        self.page_ids, self.run_ids = Ids(), Ids()
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.returncode = 0
        bin_dir = str(Path(sys.executable).parent)
        self.env = environment(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
                               PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""), NO_COLOR="1", COLUMNS="120")

    def run(self, block: Block) -> None:
        for index, step in enumerate(steps(block)):
            self.step(block, step, index)

    def step(self, block: Block, step: Step, index: int) -> None:
        words = shlex.split(step.command.replace(".venv/bin/", ""), comments=True)  # this interpreter's bin is on PATH
        command = step.command.replace(PAGE_DIR, str(self.workdir)).replace(".venv/bin/", "")
        where = f"{block.where}, step {index + 1} ({step.command})"
        if words == ["echo", "$?"]:
            shown = [line for line in step.shown if line.strip()]
            assert shown == [str(self.returncode)], f"{where}: the previous command exited {self.returncode}"
            self.returncode = 0
            return
        assert self.returncode == 0, f"{block.where}: exit {self.returncode} before {step.command!r}, unchecked"
        if words[0] == "cd":
            self.cwd = Path(words[1].replace(PAGE_DIR, str(self.workdir)))
            assert self.cwd.is_dir(), where
            return
        if words[:2] == ["dormant", "dev"]:
            self.start_dev(words[2:])
            self.compare(where, step.shown, self.console_banner(len(normalized(step.shown, Ids()))))
            return
        reads = any(tuple(words[1:1 + len(read)]) == read for read in READS) and words[0] == "dormant"
        until = time.monotonic() + self.deadline
        while True:
            result = subprocess.run(["bash", "-c", command], cwd=self.cwd, env={**self.env, "DORMANT_URL": self.url},
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                                    stdin=subprocess.DEVNULL)
            printed = result.stdout.splitlines()
            if not reads or self.matches(step.shown, printed) or time.monotonic() > until:
                break
            time.sleep(0.3)  # the worker has not got there yet: read again
        self.returncode = result.returncode
        self.compare(where, step.shown, printed)

    def shell(self, command: str) -> subprocess.CompletedProcess[str]:
        """A command of the test's own, in the reader's terminal, its two streams apart."""
        return subprocess.run(["bash", "-c", command], cwd=self.cwd, env={**self.env, "DORMANT_URL": self.url},
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    def matches(self, shown: list[str], printed: list[str]) -> bool:
        """Whether they agree, without numbering ids yet (a read tried again must not take numbers)."""
        page, run = Ids(dict(self.page_ids.seen)), Ids(dict(self.run_ids.seen))
        return normalized(shown, page) == normalized(printed, run, self.workdir)

    def compare(self, where: str, shown: list[str], printed: list[str]) -> None:
        expected, actual = normalized(shown, self.page_ids), normalized(printed, self.run_ids, self.workdir)
        assert actual == expected, f"{where}: the page shows\n" + "\n".join(expected) + "\nthe run printed\n" + \
            "\n".join(actual)

    def start_dev(self, args: list[str]) -> None:
        self.stop()
        port = free_port()
        console = self.workdir.parent / f"dev-console-{port}.log"
        with open(console, "wb") as out:
            self.process = subprocess.Popen([str(Path(sys.executable).with_name("dormant")), "dev", *args, "--port",
                                             str(port)], cwd=self.cwd, env=self.env, stdout=out,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.console = console
        self.url = f"http://127.0.0.1:{port}"
        dev_answers(self.url, self.process, lambda: console.read_text(errors="replace"), timeout=90)

    def console_banner(self, lines: int) -> list[str]:
        """The first `lines` lines of the dev console's banner (its log lines, which may come first, left out)."""
        until = time.monotonic() + 30
        while True:  # (the API answers before the banner is written whole)
            text = self.console.read_text(errors="replace")
            banner = [line for line in text.splitlines() if line.strip() and not LOG_LINE.match(line)][:lines]
            if len(banner) == lines or time.monotonic() > until:
                return banner
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
