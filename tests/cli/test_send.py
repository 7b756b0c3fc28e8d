"""`dormant send` says what became of the message: answered, received without an answer, held by a stopped
workflow (exit 3), or not answered in time (exit 1). The API (uvicorn over a TestEnv) runs in a thread of its
own; the commands run in-process, as in tests/cli/test_token.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from dormant.cli.actor import send_outcome
from dormant.cli.main import app
from dormant.models import SendResult
from dormant.workflow.history import WorkflowState
from tests.api.apps import desk_registry
from tests.cli.support import api_in_thread


@pytest.fixture
def api() -> Iterator[str]:
    with api_in_thread(desk_registry()) as url:
        yield url


def send(api: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["send", "desk", "d", *args, "--url", api], env={"NO_COLOR": "1",
                                                                                      "COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())


def test_each_outcome_has_its_words_and_exit_code(api: str) -> None:
    code, words = send(api, "notes", '{"amount": 1}', "--wait", "--timeout", "20")
    assert code == 0 and words.startswith("received (message ")
    assert "without answering" in words and "no response will come" in words
    code, words = send(api, "orders", '{"amount": 7}', "--wait", "--timeout", "20")
    assert code == 0 and words.startswith("completed (message ") and '"balance": 7' in words

    send(api, "notes", '{"amount": 2}')
    code, words = send(api, "orders", '{"amount": 500}', "--wait", "--timeout", "20")
    assert code == 3, words  # (before: exit 0 after the whole timeout, saying timedOut)
    assert "then stopped (failed) before answering it" in words

    for extra in ([], ["--wait"]):  # (before: "queued" and exit 0)
        code, words = send(api, "notes", '{"amount": 3}', *extra)
        assert code == 3 and words.startswith("queued (message ")
        assert "workflow is failed" in words and "runs after an operator resumes the actor" in words

    code, out = send(api, "notes", '{"amount": 4}', "--json")
    assert code == 3 and json.loads(out) == {"status": "queued", "id": json.loads(out)["id"], "response": None,
                                             "workflow": "failed"}


def test_the_words_for_a_timeout_and_an_ended_workflow() -> None:
    timed_out = send_outcome(SendResult(status="timedOut", id="m-1"), 2.5)
    assert "no answer within 2.5 s" in timed_out and "--id m-1 --wait" in timed_out
    ended = send_outcome(SendResult(status="queued", id="m-2", workflow=WorkflowState.COMPLETED), 30)
    assert "has ended (completed)" in ended and "not processed and never will be" in ended
    unanswered = send_outcome(SendResult(status="received", id="m-4", workflow=WorkflowState.COMPLETED), 30)
    assert "then ended (completed) without answering it" in unanswered
    assert send_outcome(SendResult(status="queued", id="m-3"), 30) == "queued (message m-3)"
