"""Every `dormant` command that prints what callers stored (keys, message bodies and ids, senders, state, history,
errors, search attributes, callbacks, operators' reasons, kept versions, replay reports) prints no raw control,
bidi or separator character of it: not in tables and words, not on stderr, not in --json (valid JSON whose
strings carry them as escapes, the values intact). The commands are enumerated from the Typer app: a command this
test does not run fails it (`dormant dev`, a server, is checked by tests/e2e/test_cli_terminal.py).

The API is uvicorn over a TestEnv (dev mode) in a thread of its own; the commands run in-process (CliRunner)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import BaseModel
from typer.testing import CliRunner

from dormant import StepContext, WorkflowContext, actor, callback, queue, setup
from dormant.cli.common import key_text
from dormant.cli.main import app
from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from dormant.workflow.caller import Caller
from tests.api.support import serve

BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
SEPARATORS = "\u2028\u2029"
TAG = "\u202eRTL\u202c\u2066ISO\u2069\u200e\u200f\u061c\u2028LS\u2029PS"  # a search string holds no control
EVIL = f"\x1b[2J\x9b31m\x85{TAG}\x7fDEL\r\nFORGED\t\x07[bold]B[/bold]:warning:"
KEY = ("k" + EVIL,)
SECOND = ("second" + EVIL,)
FORK = ("fork" + EVIL,)
MESSAGE_ID = f"id\u202e\u2028{BIDI}"  # an in-process message id may hold what is not a control
SENDER = Caller(kind="jwt", id=EVIL)
ELSEWHERE = {("dev",): "a server: its console is checked by tests/e2e/test_cli_terminal.py",
             # no server, no actor data: they write a project's files (tests/unit/test_scaffold.py, test_package.py)
             ("new",): "tests/unit/test_scaffold.py", ("package",): "tests/unit/test_package.py"}
ESCAPED_BIDI = ("\\u202e", "~E2~80~AE")  # as text or JSON shows it, as a key shows it
ESCAPED_C1 = ("\\x9b", "\\u009b", "~C2~9B")


class Note(BaseModel):
    text: str


class Notes(BaseModel):
    texts: list[str] = []
    tokens: dict[str, str] = {}
    outcome: str = ""


evil = actor("evil", state=Notes, queues={"note": queue(Note, response=Note), "later": queue(Note)},
             search={"tag": str})


def _notes(prefix: str) -> Callable[[WorkflowContext], Any]:
    """The workflow: each note recorded by a step named after it (the first outside the loop, so that its entry
    stays in the history), answered with its text."""

    async def take(ctx: WorkflowContext, wait: str) -> None:
        message = await ctx.queue.next(wait, names=["note"], completable=True)
        text = message.body.text

        def record(s: StepContext) -> str:
            s.state.texts.append(text)
            s.search["tag"] = TAG
            return text

        # a location (`dormant versions`, a replay's divergence show them) from the data ('/' separates names)
        await ctx.step(f"{prefix} {text.replace('/', '|')}", record)
        assert message.complete is not None
        await message.complete({"text": text})

    async def run(ctx: WorkflowContext) -> None:
        await take(ctx, "first-note")

        async def iteration(loop: WorkflowContext) -> None:
            await take(loop, "wait-note")

        await ctx.loop("notes", iteration)

    return run


evil.workflow(_notes("note"))


@evil.action
def echo(c: Any, text: str) -> dict[str, str]:
    return {"echo": text}


@evil.action
def refuse(c: Any, text: str) -> None:
    raise ValueError(text)


asker = actor("asker", state=Notes, callbacks={"reply": callback(Note), "other": callback(Note)})


@asker.workflow
async def ask(ctx: WorkflowContext) -> None:
    reply = await ctx.callback("reply", timeout=3600, heartbeat_timeout=1800)
    other = await ctx.callback("other", timeout=3600)

    def hand_out(s: StepContext) -> None:
        s.state.tokens = {"reply": reply.token, "other": other.token}

    await ctx.step("hand-out", hand_out)
    answer = await reply.result()
    try:
        await other.result()
    except Exception as error:  # failed by the outside system, with its message
        outcome = f"{type(error).__name__}: {error}"

    def record(s: StepContext) -> None:
        s.state.texts.append(answer.text)
        s.state.outcome = outcome

    await ctx.step("record", record)
    await ctx.sleep("nap", 3600)
    await ctx.sleep("nap-again", 3600)


failing = actor("failing", state=Notes, queues={"note": queue(Note)})


@failing.workflow
async def fail(ctx: WorkflowContext) -> None:
    text = (await ctx.queue.next("wait-note")).body.text

    def boom(s: StepContext) -> None:
        raise ValueError(text)

    await ctx.step("boom", boom, max_retries=0)


registry = setup(evil, asker, failing)
renamed_evil = actor("evil", state=Notes, queues={"note": queue(Note, response=Note), "later": queue(Note)},
                     search={"tag": str})
renamed_evil.workflow(_notes("renamed"))
renamed = setup(renamed_evil, asker, failing)
"""The next deploy, whose step names differ: `dormant replay` reports the recorded (hostile) ones."""


@pytest.fixture(scope="module")
def api() -> Iterator[dict[str, Any]]:
    ready, stop = threading.Event(), threading.Event()
    found: dict[str, Any] = {}

    async def main() -> None:
        async with TestEnv(registry) as env:
            for key in (KEY, SECOND):
                await env.client.get_or_create("evil", key).send("note", {"text": EVIL})
                await env.client.as_caller(SENDER).get_or_create("evil", key).send(
                    "later", {"text": EVIL}, message_id=MESSAGE_ID)  # never read: it waits in the inbox
            await env.client.get_or_create("failing", KEY).send("note", {"text": EVIL})
            await env.client.get_or_create("asker", KEY).status()
            await env.run_until_idle()
            found["tokens"] = (await env.client.get_or_create("asker", KEY).state()).tokens
            async with serve(create_app(registry, Settings(dev=True, auth_mode="none"),  # type: ignore[arg-type]
                                        service=env.service)) as url:
                found["url"] = url
                ready.set()
                while not stop.is_set():
                    await asyncio.sleep(0.02)
                    await env.run_until_idle()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(30)
    yield found
    stop.set()
    thread.join(30)


def raw(text: str) -> list[str]:
    """What a terminal acts on or shows out of order: controls (but line feeds), bidi controls, separators."""
    return sorted({repr(ch) for ch in text
                   if (unicodedata.category(ch) == "Cc" and ch != "\n") or ch in BIDI or ch in SEPARATORS})


def strings(value: Any) -> list[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *strings(v)]]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return []


def commands() -> dict[tuple[str, ...], Any]:
    """Every command of the `dormant` app, by its words (`("actors", "list")`)."""
    found: dict[tuple[str, ...], Any] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)  # a group (Typer's click is its own: no isinstance)
        if isinstance(subcommands, dict):
            for name, sub in subcommands.items():
                walk(sub, (*path, name))
        else:
            found[path] = command

    walk(typer.main.get_command(app), ())
    return found


def takes_json(command: Any) -> bool:
    return any("--json" in getattr(param, "opts", ()) for param in command.params)


@dataclass
class Session:
    url: str
    commands: dict[tuple[str, ...], Any] = field(default_factory=commands)
    ran: set[tuple[str, ...]] = field(default_factory=set)
    ran_json: set[tuple[str, ...]] = field(default_factory=set)

    def run(self, *args: str, code: int = 0, shows: bool = True, json_out: bool = False, url: bool = True,
            stdin: str | None = None) -> Any:
        """Run a command; check its output holds nothing raw, shows the data escaped (`shows`), and with --json is
        JSON (lines, for an export) holding the data intact."""
        path = next(p for p in self.commands if tuple(args[:len(p)]) == p)
        self.ran.add(path)
        words = [*args, *(["--url", self.url] if url else [])]
        result = CliRunner().invoke(app, words, input=stdin, env={"COLUMNS": "100", "NO_COLOR": "1"})
        both = result.stdout + result.stderr
        assert result.exit_code == code, f"dormant {args} -> {result.exit_code}:\n{both}"
        assert raw(result.stdout) == [] and raw(result.stderr) == [], f"dormant {args}:\n{both!r}"
        assert not any(line.startswith("FORGED") for line in both.splitlines()), f"dormant {args}:\n{both}"
        if shows:  # (every hostile value has a U+202E; not all have a C1 control: a search string has none)
            assert any(m in both for m in ESCAPED_BIDI), f"{args}:\n{both}"
        if "--json" in args or json_out:
            self.ran_json.add(path)
            values = [json.loads(line) for line in result.stdout.splitlines() if line] if json_out else \
                [json.loads(result.stdout)] if result.stdout else []
            if shows and (values or code == 0):  # (an error is a line on stderr, --json or not)
                intact = (EVIL, EVIL.replace("/", "|"), TAG)  # (a step's name has no '/')
                assert any(whole in s for v in values for s in strings(v) for whole in intact), args
        return result


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, f"no {what} within 30 s"
        time.sleep(0.05)


def _status(session: Session, name: str, key: tuple[str, ...]) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(session.run("status", name, key_text(key), "--json", shows=False).stdout)
    return status


def test_no_command_prints_a_raw_control_of_the_data(api: dict[str, Any], tmp_path: Path) -> None:
    s = Session(api["url"])
    k, second, fork = key_text(KEY), key_text(SECOND), key_text(FORK)
    evil_json = json.dumps({"text": EVIL})

    for extra in ([], ["--json"]):
        s.run("actors", "list", *extra)
        s.run("actors", "list", "--where", "tag^=\u202eRTL", *extra)
        s.run("actors", "count", *extra, shows=False)  # types and numbers only
        s.run("actors", "count", "--where", f"tag={TAG}", *extra, shows=False)
        for name in ("evil", "failing", "asker"):
            s.run("status", name, k, *extra, shows=name != "asker")  # (the asker's callbacks: declared names)
            s.run("history", "show", name, k, *extra, shows=name != "asker")
        s.run("state", "evil", k, *extra)
        inbox = s.run("inbox", "evil", k, *extra).stdout
        assert any(m in inbox for m in ESCAPED_C1) and "\\u2028" in inbox  # (issue 26: U+009B, U+2028 were raw)
        s.run("call", "evil", k, "echo", EVIL, *extra)
        s.run("call", "evil", k, "refuse", EVIL, *extra, code=2)  # the action's error, on stderr
        s.run("send", "evil", k, "note", evil_json, "--wait", *extra)  # the response
        s.run("versions", "evil", k, *extra)
        s.run("versions", "evil", k, "--at", "2", *extra)
        s.run("doctor", "evil", k, *extra)
        s.run("doctor", "evil", *extra, shows=bool(extra))  # (the table names only broken actors: none here)
    s.run("history", "export", "evil", k, json_out=True)  # JSON lines on stdout
    export = tmp_path / "evil.jsonl"
    s.run("history", "export", "evil", k, "--out", str(export))

    # the outside system's commands: what they print is the callback's declared name, its state and deadlines
    tokens = api["tokens"]
    for extra in ([], ["--json"]):
        s.run("callback", "status", tokens["reply"], *extra, shows=False)
        s.run("callback", "heartbeat", tokens["reply"], *extra, shows=False)
    s.run("callback", "complete", tokens["reply"], "--result", evil_json, "--json", shows=False)
    for extra in ([], ["--json"]):  # (the same failure again is answered as the first)
        s.run("callback", "fail", tokens["other"], "--type", "Declined", "--message", EVIL, *extra, shows=False)
    _until(lambda: _status(s, "asker", KEY)["waiting_for"].get("deadline") is not None, "nap")
    for extra in ([], ["--json"]):  # the callbacks' result and failure, recorded
        s.run("history", "show", "asker", k, *extra)
        s.run("state", "asker", k, *extra)
    s.run("fire-timer", "asker", k)
    _until(lambda: any(e["name"] == "nap-again" for e in json.loads(
        s.run("history", "show", "asker", k, "--json", shows=False).stdout)), "the second nap")
    s.run("fire-timer", "asker", k, "--json")

    # operators' reasons are stored and shown back
    s.run("pause", "evil", k, "--reason", EVIL)
    for extra in ([], ["--json"]):
        s.run("status", "evil", k, *extra)
        s.run("history", "show", "evil", k, *extra)
    s.run("unpause", "evil", k, "--json")
    s.run("pause", "--all", "--type", "evil", "--reason", EVIL, "--json")
    s.run("unpause", "--all", "--type", "evil")
    s.run("fork", "evil", k, "--at", "2", "--as", fork, "--reason", EVIL)
    s.run("fork", "evil", k, "--at", "2", "--as", key_text(("json", *FORK)), "--reason", EVIL, "--json")
    s.run("reset", "evil", fork, "--to", "2", "--reason", EVIL, code=2, stdin="n\n")  # asked on stderr: no
    s.run("reset", "evil", fork, "--to", "2", "--reason", EVIL, "--yes", "--json")
    s.run("status", "evil", fork)  # who reset it, and why
    s.run("resume", "failing", k)
    _until(lambda: _status(s, "failing", KEY)["workflow"] == "failed", "the failed resume")
    s.run("resume", "--all", "--status", "failed", "--json")
    s.run("replay", str(export), "--app", "tests.cli.test_hostile_output:registry", url=False)
    s.run("replay", str(export), "--app", "tests.cli.test_hostile_output:renamed", "--json", url=False, code=1)
    for extra in ([], ["--json"]):
        s.run("replay", "--all", "--app", "tests.cli.test_hostile_output:renamed", *extra, code=1)
    s.run("terminate", "evil", second, "--reason", EVIL)
    s.run("terminate", "evil", fork, "--reason", EVIL, "--json")
    s.run("status", "evil", second, "--json")
    s.run("delete", "failing", k, code=2, stdin="n\n")  # the question, on stderr: no
    s.run("delete", "failing", k, "--yes", "--json")

    everything = set(s.commands)
    assert s.ran | set(ELSEWHERE) == everything, f"not run here: {sorted(everything - s.ran - set(ELSEWHERE))}"
    with_json = {path for path, command in s.commands.items() if takes_json(command)}
    assert with_json - set(ELSEWHERE) <= s.ran_json, f"never run with --json: {sorted(with_json - s.ran_json)}"
    assert ("history", "export") in s.ran_json  # (JSON lines, no --json option)
