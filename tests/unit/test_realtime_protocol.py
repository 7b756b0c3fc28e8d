"""The realtime protocol's frames and the client's ordering rule (dormant.core.realtime)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from dormant.core.realtime import MAX_FRAME_BYTES, Sequencer, Subscribe, event_frame, parse
from dormant.core.records import EventRecord


def _event(seq: int) -> dict[str, Any]:
    return {"type": "event", "seq": seq, "name": "noted", "payload": seq}


def test_replayed_and_live_events_interleaved_and_repeated_come_out_once_in_order() -> None:
    sequencer = Sequencer(cursor=2)
    taken: list[dict[str, Any]] = []
    for frame in [_event(6), _event(3), _event(2), _event(4), _event(6), _event(5), _event(6),
                  {"type": "subscribed", "cursor": 5}, _event(7), _event(7)]:
        taken += sequencer.take(frame)
    assert [frame["seq"] for frame in taken] == [3, 4, 5, 6, 7]
    assert not sequencer.gap() and sequencer.cursor == 7


def test_expired_events_below_the_replays_cursor_are_no_gap_but_a_live_skip_is() -> None:
    sequencer = Sequencer(cursor=0)
    assert sequencer.take(_event(40)) == [] and not sequencer.gap()  # replay still running
    assert [f["seq"] for f in sequencer.take({"type": "subscribed", "cursor": 40})] == [40]
    assert sequencer.take(_event(43)) == [] and sequencer.gap()  # 41 and 42 never came: re-subscribe from 40
    assert sequencer.cursor == 40


def test_an_event_too_big_for_a_frame_is_pushed_as_a_reference() -> None:
    small = json.loads(event_frame("notes", ("k",), EventRecord(seq=1, name="n", payload="x", at=1.0)))
    assert small["payload"] == "x" and "fetch" not in small
    big = event_frame("notes", ("k",), EventRecord(seq=2, name="n", payload="x" * MAX_FRAME_BYTES, at=1.0))
    assert len(big) < 200 and json.loads(big)["fetch"] is True and "payload" not in json.loads(big)


def test_frames_are_checked() -> None:
    frame = parse('{"type": "subscribe", "actor": "notes", "key": ["a"], "after": 3}')
    assert isinstance(frame, Subscribe) and frame.after == 3
    for bad in ['{"type": "subscribe", "actor": "notes", "key": [], "after": 0}',
                '{"type": "subscribe", "actor": "notes", "key": ["a"], "after": -1}',
                '{"type": "shout"}', '{"type": "ping", "extra": 1}']:
        with pytest.raises(ValidationError):
            parse(bad)
    with pytest.raises(ValueError):
        parse("not json")


def test_a_signing_client_presigns_each_websocket_connection_and_others_use_the_plain_url() -> None:
    from urllib.parse import parse_qs, urlparse

    from botocore.credentials import Credentials  # type: ignore[import-untyped]

    from dormant.http.client import HttpClient
    from dormant.http.signing import SigV4

    plain = HttpClient("http://127.0.0.1:8787")
    assert plain.socket_url() == "ws://127.0.0.1:8787/realtime"
    url = "wss://abc123.execute-api.eu-west-1.amazonaws.com/prod"
    signing = HttpClient("https://api.example.com", auth=SigV4(credentials=Credentials("AKIDEXAMPLE", "secret")),
                         realtime_url=url)
    signed = urlparse(signing.socket_url())
    query = parse_qs(signed.query)
    assert (signed.scheme, signed.netloc, signed.path) == ("wss", "abc123.execute-api.eu-west-1.amazonaws.com", "/prod")
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"] and query["X-Amz-Expires"] == ["300"]
    assert query["X-Amz-Credential"][0].startswith("AKIDEXAMPLE/") and query["X-Amz-Credential"][0].endswith(
        "/eu-west-1/execute-api/aws4_request")  # the region read from the URL
    assert len(query["X-Amz-Signature"][0]) == 64
