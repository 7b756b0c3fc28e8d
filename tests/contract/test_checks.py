"""The checks every request path makes before its first write (check_message, check_creation, check_commit): no
I/O, and a value over the per-value ceiling (dormant.core.limits.VALUE, the same on every backend: larger values are
kept in S3 on DynamoDB) is refused with ItemTooLargeError naming that limit, and nothing is stored. What one DynamoDB
item can hold without a bucket is in tests/integration/test_aws_store.py and test_limits.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from dormant.core.limits import VALUE
from dormant.errors import ItemTooLargeError
from dormant.ports import EventStore, InboxMessage
from tests.contract.conftest import Backend
from tests.contract.support import T0, created, draft, entry, message, meta, ref


def of_size(size: int, wrap: Callable[[str], Any] = lambda text: text) -> Any:
    """`wrap(text)` whose compact JSON is exactly `size` bytes."""
    empty = len(json.dumps(wrap(""), separators=(",", ":")))
    return wrap("c" * (size - empty))


AT_THE_CEILING = of_size(VALUE.maximum)
OVER_THE_CEILING = of_size(VALUE.maximum + 1)


def refused(call: Any, *args: Any) -> ItemTooLargeError:
    with pytest.raises(ItemTooLargeError) as raised:
        call(*args)
    assert raised.value.limit is VALUE, raised.value
    return raised.value


async def test_check_message_refuses_a_body_or_arguments_over_the_ceiling(store: EventStore) -> None:
    actor = ref()
    store.check_message(actor, message("fine"))
    store.check_message(actor, message("at", of_size(VALUE.maximum, lambda text: {"data": text})))
    store.check_message(actor, message("at", AT_THE_CEILING))
    refused(store.check_message, actor, message("over", OVER_THE_CEILING))
    refused(store.check_message, actor, message("over", {"data": AT_THE_CEILING}))
    refused(store.check_message, actor, InboxMessage(id="args", queue="reset", kind="action", created_at=T0,
                                                     args=[OVER_THE_CEILING]))
    assert await store.load(actor) is None and await store.message_fingerprint(actor, "over") is None


async def test_check_creation_refuses_an_input_a_state_or_an_event_over_the_ceiling(store: EventStore) -> None:
    actor = ref()
    store.check_creation(actor, meta(actor_input={"n": 1}), {"value": 0}, [("created", {"by": "test"})])
    store.check_creation(actor, meta(actor_input=AT_THE_CEILING), {"value": 0}, [])
    refused(store.check_creation, actor, meta(actor_input=OVER_THE_CEILING), {"value": 0}, [])
    refused(store.check_creation, actor, meta(), {"value": OVER_THE_CEILING}, [])
    refused(store.check_creation, actor, meta(), {"value": 0}, [("created", OVER_THE_CEILING)])
    assert not await store.exists(actor)


@pytest.mark.parametrize("read", [True, False], ids=["version-read", "version-not-read"])
async def test_check_commit_refuses_any_value_of_a_draft_over_the_ceiling(backend: Backend, read: bool) -> None:
    actor = await created(backend.store)
    store = backend.store if read else backend.another_process()  # (on DynamoDB: one that has not read version 1)
    store.check_commit(actor, 1, draft(upserts=[entry("fetch", 1, "small")], state={"value": 1},
                                       responses={"m": "ok"}, events=[("e", 1)]))
    store.check_commit(actor, 1, draft(state=of_size(VALUE.maximum, lambda text: {"value": text})))
    refused(store.check_commit, actor, 1, draft(state={"value": AT_THE_CEILING}))
    refused(store.check_commit, actor, 1, draft(upserts=[entry("big-step", 1, OVER_THE_CEILING)]))
    refused(store.check_commit, actor, 1, draft(responses={"m": OVER_THE_CEILING}))
    refused(store.check_commit, actor, 1, draft(events=[("e", OVER_THE_CEILING)]))
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.version == 1 and snapshot.history == []


async def test_a_commit_refuses_what_check_commit_refuses_and_changes_nothing(store: EventStore) -> None:
    """EventStore.check_commit: a store that has not read the version may let a draft pass, so `commit` checks again
    before it writes, and raises the same error then."""
    actor = await created(store)
    with pytest.raises(ItemTooLargeError) as raised:
        await store.commit(actor, 1, draft(upserts=[entry("big-step", 1, OVER_THE_CEILING)], state={"value": 1}))
    assert raised.value.limit is VALUE
    snapshot = await store.load(actor)
    assert snapshot is not None and (snapshot.version, snapshot.state, snapshot.history) == (1, {"value": 0}, [])


async def test_a_refusal_names_the_limit_and_the_actor_type_but_never_its_key(store: EventStore) -> None:
    actor = ref("secret-key-part")
    errors = [refused(store.check_message, actor, message("over", OVER_THE_CEILING)),
              refused(store.check_creation, actor, meta(actor_input=OVER_THE_CEILING), {"value": 0}, []),
              refused(store.check_commit, actor, 1, draft(state={"value": AT_THE_CEILING}))]
    for error in errors:
        text = str(error)
        assert VALUE.name in text and "'counter'" in text and "secret-key-part" not in text, text
